#!/bin/sh
# t1203-synth-output.sh - output errors: a clean one-line message, exit 3,
# and no partial file; devices are written in place; a shard is never
# replaced (exit 2).
. "$top_srcdir/tests/test-lib.sh"

S="-n 2 -W 64 -H 48 -m 5"
run_status 3 "missing directory" sa1b-synth $S -o "$TMP/nodir/x.tar"
is "$(wc -l <"$TMP/.err" | tr -d ' ')" 1 "one line"
grep_ok "^sa1b-synth: cannot create '$TMP/nodir/x.tar': No such file or directory$" "$TMP/.err" \
    "names the file and the reason"

: >"$TMP/file"
run_status 3 "path under a regular file" sa1b-synth $S -o "$TMP/file/x.tar"
grep_ok "^sa1b-synth: cannot create '$TMP/file/x.tar': Not a directory$" "$TMP/.err" "says why"

mkdir "$TMP/dir"
run_status 3 "a directory as output" sa1b-synth $S -o "$TMP/dir"
grep_ok "Is a directory" "$TMP/.err" "says why"
is "$(ls -A "$TMP/dir")" "" "nothing left in it"

if [ -w /dev/full ]; then
    sa1b-synth $S >/dev/full 2>"$TMP/full.err"
    is "$?" 3 "a full disk on stdout: exit 3"
    grep_ok "^sa1b-synth: cannot write 'standard output': .*(No space left on device|space)" \
        "$TMP/full.err" "... with the reason"
    run_status 3 "-o /dev/full: exit 3" sa1b-synth $S -o /dev/full
else
    skip 3 "/dev/full missing"
fi

run_ok "-o /dev/null is written in place" sa1b-synth $S -o /dev/null
[ -c /dev/null ]
ok $? "/dev/null is still a device"

# a good run replaces an existing file atomically and leaves no temporary
echo old >"$TMP/out.tar"
run_ok "overwrite an existing tar" sa1b-synth $S -o "$TMP/out.tar"
tar tf "$TMP/out.tar" >/dev/null
ok $? "the result is a tar"
is "$(ls -A "$TMP" | grep -c '^\.\{0,1\}out\.tar.')" 0 "no temporary file left"
chmod 600 "$TMP/out.tar"
run_ok "overwrite a private tar" sa1b-synth $S -o "$TMP/out.tar"
is "$(stat -c %a "$TMP/out.tar")" 600 "... which stays private (mode 600)"

# a shard is never replaced (-o x.shard for x.tar: a typo that would lose it)
mkdir "$TMP/sh"
run_ok "a shard" sa1b-shard -q --image-size 32 -o "$TMP/sh/a.shard" "$TMP/out.tar"
cp "$TMP/sh/a.shard" "$TMP/sh/keep"
run_status 2 "-o a shard: refused" sa1b-synth $S -o "$TMP/sh/a.shard"
grep_ok "^sa1b-synth: -o '$TMP/sh/a.shard' is a shard: not replaced; give another file$" "$TMP/.err" "in one line"
cmp -s "$TMP/sh/a.shard" "$TMP/sh/keep"
ok $? "the shard is left as it was"

# a killed run leaves neither the output nor a temporary file
mkdir "$TMP/kill"
sa1b-synth -n 100000 -W 64 -H 48 -m 5 -o "$TMP/kill/k.tar" &
pid=$!
sleep 1
kill -TERM $pid
{ wait $pid; } 2>/dev/null
is "$(ls -A "$TMP/kill")" "" "SIGTERM mid-run leaves nothing"

# a run that fails midway to standard output leaves a tar that reads as cut
# (no end-of-archive blocks), never as a smaller whole one (before: libarchive
# closed it with them, and sa1b-shard took it for a complete tar, exit 0)
SA1B_TEST_FAIL=image:4 sa1b-synth --quiet -n 6 -W 160 -H 120 -m 3 >"$TMP/cut.tar" 2>"$TMP/cut.err"
is "$?" 3 "a run failing at its 4th image to standard output: exit 3"
grep_ok "^sa1b-synth: image 4: out of memory \(SA1B_TEST_FAIL\)$" "$TMP/cut.err" "one line says why"
run_status 1 "sa1b-shard reads what it wrote as a cut input" sa1b-shard -q --image-size 32 -o "$TMP/cut.shard" - <"$TMP/cut.tar"
grep_ok "input ends early" "$TMP/.err" "and says so"

done_testing
