#!/bin/sh
# t1710: a training run holds an exclusive lock (flock) on its --out folder
# for its whole life: a second run there (new with --overwrite, or
# --resume) is refused at once with one line naming the folder and the
# process, exit 2, and changes nothing; once the first ends, --resume goes on.
. "$top_srcdir/tests/test-lib.sh"
common="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 1 --synthetic-batch 7 --threads 1 -q"

# a run that stays until it is told to stop (SIGTERM: checkpoint, exit 130)
sa1b-train $common --steps 1000000 --log-every 1 --ckpt-every 2 --out "$TMP/a" 2>"$TMP/a.err" &
pid=$!
i=0
while [ ! -s "$TMP/a/latest" ] && [ $i -lt 1200 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
test -s "$TMP/a/latest"
ok $? "the first run has written a checkpoint"
run_status 2 "a second run with --overwrite is refused" sa1b-train $common --steps 4 --out "$TMP/a" --overwrite
grep_ok "^sa1b-train: output folder '$TMP/a' is in use by another sa1b-train run \(process $pid\)" "$TMP/.err" \
    "the line names the folder and the process"
is "$(wc -l <"$TMP/.err" | tr -d ' ')" "1" "in one line"
run_status 2 "--resume of the running run is refused" sa1b-train --resume "$TMP/a" -q --steps 4
grep_ok "is in use by another sa1b-train run" "$TMP/.err" "for the same reason"
# (the first run goes on writing checkpoints: its own temporaries may be there)
test -e "$TMP/a/model-2.safetensors" &&
    ! ls "$TMP/a" | grep '\.tmp' | grep -qv -e "\.tmp\.$pid\.[0-9]*\$" -e '^latest\.tmp$' -e '^log\.jsonl\.tmp$'
ok $? "the first run's files are there, no temporary of the others"
kill -TERM $pid
wait $pid
is "$?" "130" "the first run stops on SIGTERM with a checkpoint"
step=$(cat "$TMP/a/latest")
run_ok "once it has ended, --resume goes on" sa1b-train --resume "$TMP/a" -q --steps $((step + 2))
is "$(cat "$TMP/a/latest")" "$((step + 2))" "to its new last step"

if command -v flock >/dev/null 2>&1; then
    run_status 2 "a folder locked by another process is refused" \
        flock "$TMP/a/.sa1b-train.lock" sa1b-train --resume "$TMP/a" -q --steps $((step + 4))
    is "$(cat "$TMP/a/latest")" "$((step + 2))" "and nothing in it changes"
    # the lock is a file of its own: a tool that locks the folder (sa1b-shard's commit) is not held up
    if command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null; then
        sa1b-synth -n 2 -W 120 -H 80 -m 3 -o "$TMP/s.tar" --quiet
        flock "$TMP/a/.sa1b-train.lock" timeout 60 sa1b-shard -q --image-size 32 -o "$TMP/a/s.shard" "$TMP/s.tar"
        ok $? "sa1b-shard writes into a folder whose training run holds its lock"
    else
        skip 1 "sa1b-synth or sa1b-shard not built"
    fi
else
    skip 3 "no flock(1)"
fi

# temporaries a killed run left (its own, and a NAME.tmp of older versions)
# go when the next run takes the lock; a file that only looks like one stays
: >"$TMP/a/model-2.safetensors.tmp.99999.0"
: >"$TMP/a/state-2.bin.tmp"
: >"$TMP/a/log.jsonl.tmp.notes"
run_ok "--resume once more" sa1b-train --resume "$TMP/a" -q --steps $((step + 3))
test ! -e "$TMP/a/model-2.safetensors.tmp.99999.0" && test ! -e "$TMP/a/state-2.bin.tmp"
ok $? "removes the temporaries a killed run left"
test -e "$TMP/a/log.jsonl.tmp.notes"
ok $? "not a file that only looks like one"
done_testing
