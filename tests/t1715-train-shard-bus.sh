#!/bin/sh
# t1715: a training shard truncated while the run reads it (SIGBUS) ends
# the run in one line naming the folder to resume (the one that has the
# checkpoint), exit 3, not a "Bus error" (SIGHUP, which stops a run as
# SIGINT does: t1702); after the training, and in --eval-only, the line
# says so.  The waits are bounds on a run that would otherwise go on, not
# timings.
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

sa1b-synth -n 8 -W 240 -H 160 -m 6 -s 4 -o "$TMP/b.tar" --quiet || exit 99
# truncated OUT CKPT-EVERY WAIT-FOR LABEL: a run on a fresh shard, which is
# truncated once the run's file WAIT-FOR is there; st: the run's status
truncated() {
    sa1b-shard -q --image-size 64 --mask-size 16 --force -o "$TMP/b.shard" "$TMP/b.tar" || exit 99
    sa1b-train $common --data "$TMP/b.shard" --steps 1000000 --log-every 1 --ckpt-every "$2" --out "$1" \
        2>"$1.err" &
    pid=$!
    wait_for "$1/$3" $pid
    ok $? "$4"
    truncate -s 4096 "$TMP/b.shard"
    end_of $pid
    is "$st" "3" "$4: the shard truncated under it: exit 3"
    is "$(wc -l <"$1.err" | tr -d ' ')" "1" "$4: one line"
}
truncated "$TMP/t" 2 latest "a run with a checkpoint"
grep_ok "^sa1b-train: a training shard was truncated or could not be read while it was read \(SIGBUS\); the steps after the last checkpoint are lost: --resume $TMP/t continues from it once the shards are whole$" \
    "$TMP/t.err" "the line says so and names the folder"
test -s "$TMP/t/model-$(cat "$TMP/t/latest").safetensors"
ok $? "the last checkpoint is there"
# before any checkpoint: the line does not send the user to --resume
truncated "$TMP/n" 1000000 log.jsonl "a run with no checkpoint yet"
grep_ok "\(SIGBUS\); no checkpoint was written: start the run again \(--overwrite\) once the shards are whole$" \
    "$TMP/n.err" "the line says that nothing can be resumed"

# a resume into another folder (--resume T --out R) before R's first
# checkpoint: the line names the folder that has one (T), not R
sa1b-shard -q --image-size 64 --mask-size 16 --force -o "$TMP/b.shard" "$TMP/b.tar" || exit 99
sa1b-train $common --resume "$TMP/t" --out "$TMP/r" --ckpt-every 1000000 2>"$TMP/r.err" &
pid=$!
wait_for "$TMP/r/log.jsonl" $pid
ok $? "a resume into another folder"
truncate -s 4096 "$TMP/b.shard"
end_of $pid
is "$st" "3" "the resume into another folder: exit 3"
is "$(wc -l <"$TMP/r.err" | tr -d ' ')" "1" "the resume into another folder: one line"
grep_ok "\(SIGBUS\); the steps after the last checkpoint are lost: --resume $TMP/t continues from it once the shards are whole$" \
    "$TMP/r.err" "the line names the folder resumed from, which has the checkpoint"
test ! -e "$TMP/r/latest"
ok $? "(the other folder has no checkpoint)"

# a --val shard truncated while --val is evaluated after the training
# (SA1B_TEST_BUS: the fault at that point): nothing is lost, and the line
# says so (not "the steps after the last checkpoint are lost")
sa1b-shard -q --image-size 64 --mask-size 16 --force -o "$TMP/b.shard" "$TMP/b.tar" || exit 99
SA1B_TEST_BUS=val:3 sa1b-train $common --data "$TMP/b.shard" --val "$TMP/b.shard" --steps 3 --out "$TMP/v" \
    2>"$TMP/v.err"
is "$?" "3" "SIGBUS in the evaluation of --val: exit 3"
is "$(wc -l <"$TMP/v.err" | tr -d ' ')" "1" "SIGBUS in the evaluation of --val: one line"
grep_ok "^sa1b-train: a shard was truncated or could not be read while it was read \(SIGBUS\) after the training \(--val not evaluated\): checkpoint of step 3 written$" \
    "$TMP/v.err" "the line says that the training is whole"
is "$(cat "$TMP/v/latest")" "3" "the last step's checkpoint is there"

# --eval-only: one line too, never "Bus error" (exit 135; the handler was
# set for the training alone)
SA1B_TEST_BUS=eval:1 sa1b-train $common --eval-only "$TMP/v/model-3.safetensors" --val "$TMP/b.shard" \
    >/dev/null 2>"$TMP/e.err"
is "$?" "3" "SIGBUS in --eval-only: exit 3"
is "$(cat "$TMP/e.err")" "sa1b-train: a shard was truncated or could not be read while it was read (SIGBUS)" \
    "SIGBUS in --eval-only: the line"
done_testing
