#!/bin/sh
# t1320-shard-kill.sh - a writer killed with SIGKILL mid-write leaves only
# a "<name>.tmp-XXXXXX" file, and that file never opens as a shard, even
# when renamed.
. "$top_srcdir/tests/test-lib.sh"
GEN="$BUILD/tests/test-shard-gen"
cd "$TMP" || exit 99

"$GEN" slow killed.shard -s 512 -r 64 -m 6 > slow.out 2>&1 &
pid=$!
i=0
while [ $i -lt 100 ] && ! grep -q started slow.out 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
sleep 0.5
kill -9 $pid
wait $pid 2>/dev/null
grep -q started slow.out
ok $? "the slow writer had started writing"
[ ! -e killed.shard ]
ok $? "no file under the final name"
set -- killed.shard.tmp-*
[ $# -eq 1 ] && [ -s "$1" ]
ok $? "one non-empty temp file is left: $1"
tmpfile=$1
run_status 1 "the temp file does not verify" sa1b-verify "$tmpfile"
grep_ok "unfinished shard" "$TMP/.err" "reported as an unfinished shard"
mv "$tmpfile" renamed.shard
run_status 1 "renamed, it still does not open" sa1b-inspect renamed.shard
done_testing
