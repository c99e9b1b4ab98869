#!/bin/sh
# t1200-synth-cli.sh - sa1b-synth's command line: --help, --version, usage
# errors (exit 2), and the refusal to write a tar to a terminal.
. "$top_srcdir/tests/test-lib.sh"

run_ok "--help exits 0" sa1b-synth --help
grep_ok '^Usage: sa1b-synth ' "$TMP/.out" "--help prints the usage on stdout"
cp "$TMP/.out" "$TMP/help"
run_ok "-h exits 0" sa1b-synth -h
run_ok "--version exits 0" sa1b-synth --version
grep_ok '^sa1b-synth \(sa1b\) [0-9]' "$TMP/.out" "--version names program and package"

# every long option of --help is in the man page, and the reverse
man="$SRC/man/sa1b-synth.1"
grep -o -- '--[a-z][a-z-]*' "$TMP/help" | sort -u >"$TMP/help-opts"
grep '^\.It Fl' "$man" | grep -o 'Fl -[a-z][a-z-]*' | sed 's/^Fl /-/' | sort -u >"$TMP/man-opts"
is "$(cat "$TMP/man-opts")" "$(cat "$TMP/help-opts")" "--help and the man page list the same long options"

usage() { # DESC ARGS...: exit 2, one message line plus the hint
    desc=$1; shift
    run_status 2 "$desc" sa1b-synth "$@" -o "$TMP/u.tar"
    grep_ok "^sa1b-synth: .+" "$TMP/.err" "$desc: says why"
    grep_ok "^Try 'sa1b-synth --help'" "$TMP/.err" "$desc: points to --help"
}
usage "unknown option" --frobnicate
usage "missing argument" --masks
usage "masks above 999" --masks 1000
usage "negative images" --images -1
usage "zero images" --images 0
usage "zero width" --width 0
usage "height not a number" --height 12x
usage "quality 101" --quality 101
usage "too many pixels" --width 16384 --height 16384
usage "stray argument" extra
[ ! -e "$TMP/u.tar" ]
ok $? "usage errors write nothing"

if command -v script >/dev/null 2>&1 &&
    script -qec "echo rc=pty" /dev/null </dev/null 2>/dev/null | grep -q 'rc=pty'; then
    script -qec "sa1b-synth -n 1 -W 16 -H 16 -m 2; echo rc=\$?" /dev/null >"$TMP/tty" 2>&1 </dev/null
    grep_ok 'refusing to write a tar to a terminal' "$TMP/tty" "refuses a terminal on stdout"
    grep_ok 'rc=2' "$TMP/tty" "... with exit 2"
else
    skip 2 "no script(1) or no pseudo-terminal"
fi

done_testing
