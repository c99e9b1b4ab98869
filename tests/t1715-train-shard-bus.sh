#!/bin/sh
# t1715: a training shard truncated while the run reads it (SIGBUS) ends
# the run in one line naming the folder to resume, exit 3, not a "Bus
# error" (SIGHUP, which stops a run as SIGINT does: t1702).  The waits are
# bounds on a run that would otherwise go on, not timings.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null || skip_all "sa1b-synth or sa1b-shard not built"
common="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 1 --threads 1 -q"

# waits (at most 120 s) until FILE exists and is not empty, while PID lives
wait_for() {
    i=0
    while [ ! -s "$1" ] && [ $i -lt 1200 ] && kill -0 "$2" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    test -s "$1"
}
# waits (at most 120 s) for PID to end: st, its status, or 999 when it did
# not (then killed); not in a subshell, which could not wait for it
end_of() {
    i=0
    while kill -0 "$1" 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$1" 2>/dev/null; then kill -9 "$1"; wait "$1"; st=999; else wait "$1"; st=$?; fi
}

sa1b-synth -n 8 -W 240 -H 160 -m 6 -s 4 -o "$TMP/b.tar" --quiet &&
    sa1b-shard -q --image-size 64 --mask-size 16 -o "$TMP/b.shard" "$TMP/b.tar"
ok $? "a shard"
sa1b-train $common --data "$TMP/b.shard" --steps 1000000 --log-every 1 --ckpt-every 2 --out "$TMP/t" \
    2>"$TMP/t.err" &
pid=$!
wait_for "$TMP/t/latest" $pid
ok $? "a run on it has written a checkpoint"
truncate -s 4096 "$TMP/b.shard"
end_of $pid
is "$st" "3" "the shard truncated under it: exit 3"
grep_ok "^sa1b-train: a training shard was truncated or could not be read while it was read \(SIGBUS\); the steps after the last checkpoint are lost: --resume $TMP/t continues from it once the shards are whole$" \
    "$TMP/t.err" "one line says so and names the folder"
is "$(wc -l <"$TMP/t.err" | tr -d ' ')" "1" "in one line"
test -s "$TMP/t/model-$(cat "$TMP/t/latest").safetensors"
ok $? "the last checkpoint is there"

# before any checkpoint: the line does not send the user to --resume
sa1b-shard -q --image-size 64 --mask-size 16 -o "$TMP/b.shard" "$TMP/b.tar" --force
ok $? "the shard again"
sa1b-train $common --data "$TMP/b.shard" --steps 1000000 --log-every 1 --ckpt-every 1000000 --out "$TMP/n" \
    2>"$TMP/n.err" &
pid=$!
wait_for "$TMP/n/log.jsonl" $pid
ok $? "a run with no checkpoint yet"
truncate -s 4096 "$TMP/b.shard"
end_of $pid
is "$st" "3" "the shard truncated under it: exit 3"
grep_ok "\(SIGBUS\); no checkpoint was written: start the run again \(--overwrite\) once the shards are whole$" \
    "$TMP/n.err" "one line says that nothing can be resumed"
done_testing
