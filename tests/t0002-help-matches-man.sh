#!/bin/sh
# Every program: --help (stdout, exit 0), --version, a usage error exits 2,
# and its options agree with its man page both ways (git's t0450 idea).
. "$top_srcdir/tests/test-lib.sh"
progs=""
for p in "$BUILD"/shard-tools/sa1b-* "$BUILD"/trainer/sa1b-*; do
    case $p in *.o|*.lo) continue ;; esac
    [ -x "$p" ] && [ -f "$p" ] && progs="$progs $p"
done
[ -n "$progs" ] || skip_all "no programs built"
for p in $progs; do
    name=$(basename "$p")
    page="$SRC/man/$name.1"
    "$p" --help > "$TMP/help" 2> "$TMP/help.err"
    ok $? "$name --help exits 0"
    grep -q "Usage: $name" "$TMP/help"
    ok $? "$name --help prints its usage on stdout"
    "$p" --version > "$TMP/ver" 2>&1
    grep -Eq "^$name \\(sa1b\\) [0-9]" "$TMP/ver"
    ok $? "$name --version"
    if [ -w /dev/full ]; then # a help or version that was not written is an error (exit 3)
        "$p" --help > /dev/full 2>/dev/null
        is "$?" 3 "$name --help > /dev/full exits 3"
        "$p" --version > /dev/full 2>/dev/null
        is "$?" 3 "$name --version > /dev/full exits 3"
    else
        skip 2 "no /dev/full"
    fi
    "$p" --no-such-option > /dev/null 2>&1
    [ $? -eq 2 ]
    ok $? "$name: an unknown option is a usage error (exit 2)"
    if [ ! -f "$page" ]; then
        ok 1 "$name has a man page"; continue
    fi
    grep -q '^\.Sh EXIT STATUS' "$page"
    ok $? "$name.1 has an EXIT STATUS section"
    missing=""
    for opt in $(grep -o -- '--[a-z][a-z0-9-]*' "$TMP/help" | sort -u); do
        grep -Eq -- " ${opt#-}([^a-z0-9-]|$)" "$page" || missing="$missing $opt"
    done
    is "$missing" "" "every option of $name --help is in its man page"
    extra=""
    for opt in $(sed -n 's/^\.It Fl \(.*\)/\1/p' "$page" | grep -o -- '-[a-z][a-z0-9-]*' | sort -u); do
        grep -q -- "-$opt\\b" "$TMP/help" || grep -q -- " $opt\\b" "$TMP/help" || extra="$extra $opt"
    done
    is "$extra" "" "every option of $name.1 is in --help"
done
done_testing
