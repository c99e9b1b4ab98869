#!/bin/sh
# A run killed with SIGKILL in the middle of writing never leaves a file
# that looks like a complete shard.
. "$top_srcdir/tests/test-lib.sh"
sa1b-synth --quiet --images 6 --width 200 --height 150 --masks 10 -o "$TMP/a.tar" || exit 99
size=$(stat -c %s "$TMP/a.tar")
mkfifo "$TMP/fifo" || skip_all "no mkfifo"
# feed half the tar, then stall: sa1b-shard is mid-write when killed
( head -c $((size / 2)) "$TMP/a.tar"; sleep 30 ) > "$TMP/fifo" &
feeder=$!
sa1b-shard -q --image-size 64 --name a -o "$TMP/out" - < "$TMP/fifo" &
pid=$!
i=0
while [ $i -lt 100 ] && ! ls "$TMP/out" 2>/dev/null | grep -q tmp; do sleep 0.1; i=$((i + 1)); done
ls "$TMP/out" | grep -q tmp
ok $? "a temporary file exists while the shard is being written"
kill -9 $pid
wait $pid 2>/dev/null
kill $feeder 2>/dev/null
[ ! -e "$TMP/out/a.shard" ]
ok $? "no file under the final name after SIGKILL"
bad=0
for f in "$TMP"/out/*; do
    sa1b-verify "$f" > /dev/null 2>&1 && bad=1
    sa1b-inspect "$f" > /dev/null 2>&1 && bad=1
done
[ $bad -eq 0 ]
ok $? "the leftover temporary file is not taken for a shard (verify and inspect reject it)"
run_ok "a rerun completes" sa1b-shard -q --image-size 64 -o "$TMP/out/a.shard" "$TMP/a.tar"
run_ok "and verifies" sa1b-verify "$TMP/out/a.shard"
done_testing
