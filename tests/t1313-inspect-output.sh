#!/bin/sh
# t1313-inspect-output.sh - sa1b-inspect -o FILE: the results go to FILE
# through a temporary file renamed only when every file was read, so that
# an invalid shard leaves the old manifest intact (a shell redirection would
# have emptied it before the check) and nothing temporary behind.
. "$top_srcdir/tests/test-lib.sh"
GEN="$BUILD/tests/test-shard-gen"
cd "$TMP" || exit 99

"$GEN" gen good.shard -n 4 -s 32 -r 8 -m 5 --seed 9 || exit 99
echo junk > bad.shard
sa1b-inspect --manifest good.shard > want.json || exit 99
sa1b-inspect good.shard > want.jsonl || exit 99

run_ok "--manifest -o" sa1b-inspect --manifest -o m.json good.shard
cmp -s m.json want.json
ok $? "the file holds the manifest"
is "$(wc -c < .out | tr -d ' ')" 0 "nothing on standard output"
cp m.json before.json

run_status 1 "--manifest -o with an invalid shard: exit 1" \
    sa1b-inspect --manifest -o m.json good.shard bad.shard
cmp -s m.json before.json
ok $? "the old manifest is left as it was"
grep_ok "^sa1b-inspect: 'm.json' left as it was" .err "... and the message says so"
run_status 2 "--manifest -o with standard input: usage error" sa1b-inspect --manifest -o m.json -
cmp -s m.json before.json
ok $? "the old manifest is left as it was"

run_ok "-o with JSON lines" sa1b-inspect -o x.jsonl good.shard
cmp -s x.jsonl want.jsonl
ok $? "the file holds what standard output would"
cp x.jsonl x0.jsonl
run_status 1 "-o with an invalid shard: exit 1" sa1b-inspect -o x.jsonl bad.shard good.shard
cmp -s x.jsonl x0.jsonl
ok $? "the old file is left as it was"
run_status 2 "-o without a value: usage error" sa1b-inspect good.shard -o

# -o never replaces an input or a shard (a forgotten name: -o takes the first shard)
cp good.shard g2.shard && cp good.shard keep.shard
run_status 2 "--manifest -o with the output name forgotten: refused" sa1b-inspect --manifest -o good.shard g2.shard
grep_ok "^sa1b-inspect: -o 'good.shard' is a shard: not replaced; give another file$" "$TMP/.err" "one line says why"
run_status 2 "-o naming an input: refused" sa1b-inspect -o g2.shard g2.shard
grep_ok "^sa1b-inspect: -o 'g2.shard' is the input 'g2.shard': give another file$" "$TMP/.err" "one line says why"
cmp -s good.shard keep.shard && cmp -s g2.shard keep.shard
ok $? "both shards are left as they were"

# standard output's file under another name is written through standard
# output, where the shell's redirection put it (/proc/self/fd/1 here, as
# /dev/stdout links to it; a rename over it would leave the redirected file
# empty, replace what >> appends to, and as root turn /dev/stdout into a
# regular file: so the test never names /dev/stdout itself)
if [ -e /proc/self/fd/1 ]; then
    sa1b-inspect --manifest good.shard >want.json || exit 99
    sa1b-inspect --manifest -o /proc/self/fd/1 good.shard >m.json 2>"$TMP/.err"
    is "$?" 0 "-o /proc/self/fd/1 > FILE: exit 0"
    cmp -s want.json m.json
    ok $? "FILE holds the manifest"
    echo before >m2.json
    sa1b-inspect --manifest -o /proc/self/fd/1 good.shard >>m2.json 2>"$TMP/.err"
    { echo before; cat want.json; } | cmp -s - m2.json
    ok $? "with >>, appended to what FILE held"
else
    skip 3 "no /proc/self/fd"
fi
if [ "$(id -u)" = 0 ] && getent passwd nobody >/dev/null && getent group nogroup >/dev/null; then
    sa1b-inspect --manifest -o owned.json good.shard && chown nobody:nogroup owned.json && chmod 640 owned.json || exit 99
    run_ok "-o replacing a file of another owner (as root)" sa1b-inspect --manifest -o owned.json good.shard
    is "$(stat -c %U:%G:%a owned.json)" "nobody:nogroup:640" "keeps its owner, group and mode"
else
    skip 2 "needs root, user nobody and group nogroup"
fi
# shards, as inputs named "-" too, are never replaced
cp good.shard std.shard
run_status 2 "-o naming the file standard input is redirected from: refused" sa1b-inspect -o std.shard - <std.shard
grep_ok "^sa1b-inspect: -o 'std.shard' is the input '-' \(standard input\): give another file$" "$TMP/.err" "one line says why"

is "$(ls -A | grep -c tmp)" 0 "no temporary file left"

done_testing
