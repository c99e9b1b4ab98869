#!/bin/sh
# A run killed with SIGKILL in the middle of writing never leaves a file
# that looks like a complete shard; one ended by SIGINT leaves nothing.
. "$top_srcdir/tests/test-lib.sh"
sa1b-synth --quiet --images 6 --width 200 --height 150 --masks 10 -o "$TMP/a.tar" || exit 99
size=$(stat -c %s "$TMP/a.tar")
mkfifo "$TMP/fifo" || skip_all "no mkfifo"
# stall_and_kill SIGNAL DIR: feed half the tar, then stall: sa1b-shard is
# mid-write when the signal comes; $rc is its exit status
stall_and_kill() {
    ( head -c $((size / 2)) "$TMP/a.tar"; sleep 30 ) > "$TMP/fifo" &
    feeder=$!
    sa1b-shard -q --image-size 64 --name a -o "$2" - < "$TMP/fifo" &
    pid=$!
    i=0
    while [ $i -lt 300 ] && ! ls "$2" 2>/dev/null | grep -q tmp; do sleep 0.1; i=$((i + 1)); done
    ls "$2" | grep -q tmp
    ok $? "SIG$1: a temporary file exists while the shard is being written"
    kill -"$1" $pid
    wait $pid 2>/dev/null
    rc=$?
    kill $feeder 2>/dev/null
}
stall_and_kill INT "$TMP/int"
is "$rc" "130" "SIGINT ends the run"
is "$(ls "$TMP/int" | tr '\n' ' ')" "" "and removes its temporaries"
stall_and_kill KILL "$TMP/out"
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
