#!/bin/sh
# t1600-loadbench-cli.sh - sa1b-loadbench: help, version, usage errors, exit
# statuses, the summary line, damaged samples with --verify.
. "${top_srcdir:-.}/tests/test-lib.sh"

run_ok "--help exits 0" sa1b-loadbench --help
grep_ok '^Usage: sa1b-loadbench' "$TMP/.out" "--help prints the usage on stdout"
run_ok "--version exits 0" sa1b-loadbench --version
grep_ok '^sa1b-loadbench \(sa1b\) ' "$TMP/.out" "--version prints the version"

run_status 2 "no shard is a usage error" sa1b-loadbench
run_status 2 "unknown option" sa1b-loadbench --bogus x.shard
run_status 2 "--batch 0" sa1b-loadbench --batch 0 x.shard
run_status 2 "--resume without colon" sa1b-loadbench --resume 3 x.shard
run_status 2 "--flip 2" sa1b-loadbench --flip 2 x.shard
run_status 2 "--rank not below --world" sa1b-loadbench --rank 2 --world 2 x.shard
run_status 3 "a missing shard exits 3" sa1b-loadbench "$TMP/none.shard"
grep_ok "none.shard" "$TMP/.err" "  and names it"

# two small shards of synthetic scenes
sa1b-synth -n 6 -W 200 -H 150 -m 10 -s 3 -o "$TMP/a.tar" --quiet &&
sa1b-synth -n 5 -W 150 -H 220 -m 6 -s 4 --first-id 100 -o "$TMP/b.tar" --quiet &&
sa1b-shard -q --image-size 64 --mask-size 16 -o "$TMP/out" "$TMP/a.tar" "$TMP/b.tar"
ok $? "make two shards"

run_ok "one epoch" sa1b-loadbench -b 4 -m 4 -k 3 -t 2 --flip 0.5 --verify "$TMP/out/a.shard" "$TMP/out/b.shard"
grep_ok '^batches=3 images=11 seconds=[0-9.]+ images/s=[0-9.]+ read=[0-9.]+MB/s batch_data=[0-9.]+MB/s wait=[0-9.]+% threads=2 depth=4 damaged=0$' \
    "$TMP/.out" "summary line on stdout"
run_ok "--normalize --batches 7 over epochs" sa1b-loadbench -q -n 7 -b 3 --normalize "$TMP/out/a.shard"
is "$(wc -c < "$TMP/.out" | tr -d ' ')" 0 "--quiet prints nothing"
run_status 2 "--resume beyond the images" sa1b-loadbench --resume 0:12 "$TMP/out/a.shard" "$TMP/out/b.shard"
run_ok "--resume at the epoch's end (its 11 images): the next epoch" sa1b-loadbench -q --resume 0:11 -e 2 \
    "$TMP/out/a.shard" "$TMP/out/b.shard"
run_status 2 "--drop-last with fewer images than a batch" sa1b-loadbench --drop-last -b 20 "$TMP/out/a.shard"

# damage a payload byte (payloads fill the middle of the file)
cp "$TMP/out/a.shard" "$TMP/bad.shard"
printf '\132\245' | dd of="$TMP/bad.shard" bs=1 seek=20000 conv=notrunc 2>/dev/null
run_ok "without --verify a damaged payload goes unnoticed" sa1b-loadbench -b 2 "$TMP/bad.shard"
run_status 1 "--verify stops at the damaged sample with status 1" sa1b-loadbench -b 2 --verify "$TMP/bad.shard"
grep_ok "^sa1b-loadbench: '.*bad.shard' image [0-9]+ \(id [0-9]+\): .*CRC32C" "$TMP/.err" "  the message names shard and image"
run_status 1 "--skip-damaged goes on, status 1" sa1b-loadbench -b 2 --verify --skip-damaged --print-ids "$TMP/bad.shard"
n=$(tr ' ' '\n' < "$TMP/.out" | wc -l)
lines=$(wc -l < "$TMP/.out")
# 6 images minus the damaged one, plus epoch and step per line
is "$((n - 2 * lines))" 5 "  the other 5 images are delivered"
grep_ok "damaged=1$" "$TMP/.err" "  the summary counts it"

# a FIFO is refused, never waited on (before: every reader hung in open)
if mkfifo "$TMP/fifo.shard" && command -v timeout >/dev/null; then
    for t in sa1b-loadbench sa1b-verify sa1b-inspect; do
        timeout 20 $t "$TMP/fifo.shard" >/dev/null 2>"$TMP/fifo.err"
        is "$?" 3 "$t: a FIFO named as a shard: exit 3, not a hang"
    done
    grep_ok "not a regular file" "$TMP/fifo.err" "  saying why"
else
    skip 4 "no mkfifo or timeout"
fi
# a shard truncated while it is read: one line, exit 3 (before: "Bus error", 135)
cp "$TMP/out/a.shard" "$TMP/bus.shard"
sa1b-loadbench -q -e 1000000 -t 1 "$TMP/bus.shard" 2>"$TMP/bus.err" & pid=$!
sleep 0.5
truncate -s 4096 "$TMP/bus.shard"
wait $pid
is "$?" 3 "a shard truncated while it is read: exit 3"
grep_ok "^sa1b-loadbench: a shard was truncated or became unreadable while it was read \(SIGBUS\)$" "$TMP/bus.err" \
    "  in one line"

done_testing
