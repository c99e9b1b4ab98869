#!/bin/sh
# t1706: every state file carries the run record (model, batch, masks,
# points, schedule, precision, seeds, data); --resume DIR restores it, so
# that "--resume DIR --data X" alone (and "--resume DIR" alone) continues a
# non-default run bit for bit; a flag that contradicts the run is refused in
# one line naming the run's value; --steps and the data paths may change.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null || skip_all "sa1b-synth or sa1b-shard not built"
run_ok "synthesise" sa1b-synth -n 12 -W 240 -H 160 -m 10 -s 1 -o "$TMP/train.tar" --quiet
run_ok "shard" sa1b-shard --image-size 64 --mask-size 16 -o "$TMP/train.shard" "$TMP/train.tar"
run="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --batch 3 --masks 3 --points 1 --accum 2
     --precision bf16 --lr 2e-3 --warmup 2 --seed 7 --flip 0.25 --weight-decay 0.05 --threads 2 -q"
run_ok "a non-default run of 8 steps" sa1b-train $run --steps 8 --log-every 1 --ckpt-every 4 \
    --data "$TMP/train.shard" --out "$TMP/a"
# shellcheck disable=SC2086
grep -a -q '"run.masks":"3"' "$TMP/a/state-4.bin" && grep -a -q '"run.precision":"bf16"' "$TMP/a/state-4.bin" &&
    grep -a -q '"run.enc_depth":"1"' "$TMP/a/state-4.bin" && grep -a -q '"run.config":"tiny"' "$TMP/a/state-4.bin"
ok $? "the state file holds the run record"
from4() { # DIR: the run as it was after its step-4 checkpoint
    mkdir -p "$1"
    cp "$TMP/a/model-4.safetensors" "$TMP/a/state-4.bin" "$1/"
    echo 4 >"$1/latest"
    head -4 "$TMP/a/log.jsonl" >"$1/log.jsonl"
}
from4 "$TMP/b"
run_ok "--resume DIR --data X alone" sa1b-train --resume "$TMP/b" --data "$TMP/train.shard"
cmp -s "$TMP/a/model-8.safetensors" "$TMP/b/model-8.safetensors"
ok $? "the final checkpoint is bit-identical to the run done in one go"
cmp -s "$TMP/a/state-8.bin" "$TMP/b/state-8.bin"
ok $? "and so is the final state"
sed 's/.*"loss": \([0-9.e+-]*\),.*/\1/' "$TMP/a/log.jsonl" >"$TMP/a.loss"
sed 's/.*"loss": \([0-9.e+-]*\),.*/\1/' "$TMP/b/log.jsonl" >"$TMP/b.loss"
cmp -s "$TMP/a.loss" "$TMP/b.loss"
ok $? "the log continues with the same losses, one line a step"
from4 "$TMP/c"
run_ok "--resume DIR alone" sa1b-train --resume "$TMP/c" -q
cmp -s "$TMP/a/model-8.safetensors" "$TMP/c/model-8.safetensors"
ok $? "continues the run from its recorded data"

# contradictions: refused in one line, nothing touched (float values in
# their fewest digits: 0.05, not the record's 0.050000000000000003)
from4 "$TMP/d"
for flag in "--masks 16:--masks 3" "--config small:--config tiny" "--enc-depth 2:--enc-depth 1" \
    "--precision fp32:--precision bf16" "--batch 8:--batch 3" "--lr 1e-3:--lr 0.002" "--points 2:--points 1" \
    "--synthetic-batch 3:--data $TMP/train.shard" "--weight-decay 0.3:--weight-decay 0.05"; do
    give=${flag%%:*} has=${flag#*:}
    # shellcheck disable=SC2086
    run_status 2 "--resume with $give is refused" sa1b-train --resume "$TMP/d" $give
    said=$(echo "$give" | sed 's/1e-3/0.001/')
    grep_ok "^sa1b-train: $said contradicts the run in '$TMP/d', which has $has" "$TMP/.err" "naming the run's value ($has)"
    is "$(wc -l <"$TMP/.err" | tr -d ' ')" "1" "in one line"
done
is "$(cat "$TMP/d/latest") $(wc -l <"$TMP/d/log.jsonl" | tr -d ' ')" "4 4" "a refused resume touches nothing"
run_ok "flags that agree with the run are fine" sa1b-train --resume "$TMP/d" --config tiny --masks 3 --lr 0.002 \
    --precision bf16 --threads 1 -q
cmp -s "$TMP/a/model-8.safetensors" "$TMP/d/model-8.safetensors"
ok $? "and give the same run (--threads changed)"
# a record is checked like a command line: a tampered one is refused, nothing trained
from4 "$TMP/t"
/usr/bin/python3 - "$TMP/t/state-4.bin" <<'PY' || exit 99
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"]["run.batch"] = "0"
j = json.dumps(h).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
PY
run_status 2 "a run record with --batch 0 is refused" sa1b-train --resume "$TMP/t" -q
grep_ok "batch: '0' is not an integer in 1\.\." "$TMP/.err" "with the option's own check"
is "$(cat "$TMP/t/latest")" "4" "and nothing is trained"
run_ok "--steps may change: the run goes on to 10" sa1b-train --resume "$TMP/d" --steps 10 -q
is "$(cat "$TMP/d/latest")" "10" "to step 10"
# --steps is the total: one below the step resumed from is refused (before:
# nothing was trained, and the run said it succeeded, exit 0)
cksum "$TMP/d/log.jsonl" >"$TMP/log.before"
run_status 2 "--steps below the run's step is refused" sa1b-train --resume "$TMP/d" --steps 4 -q
is "$(cat "$TMP/.err")" "sa1b-train: --steps 4 is below step 10, where the run in '$TMP/d' is: --steps is the run's total (give more than 10, or leave it out)" \
    "in one line"
cksum "$TMP/d/log.jsonl" | cmp -s - "$TMP/log.before"
ok $? "and the run is left as it was"
run_status 2 "... resumed into another --out too" sa1b-train --resume "$TMP/d" --steps 4 -q --out "$TMP/d-into"
test ! -e "$TMP/d-into"
ok $? "which is not made (before: an empty folder was left)"
run_ok "--steps at the run's step: nothing left to do" sa1b-train --resume "$TMP/d" --steps 10 -q

# a state file or model checkpoint of a later version (its format tag
# sa1b-train-state-2, -model-2) is refused in one line that says so, not
# "not a sa1b-train state file"
for kind in state model; do
    rm -rf "$TMP/fmt" && cp -r "$TMP/a" "$TMP/fmt"
    f=$(ls "$TMP/fmt/$kind-8".*)
    sed -i "s/sa1b-train-$kind-1/sa1b-train-$kind-2/" "$f"
    run_status 3 "--resume with a $kind file of format sa1b-train-$kind-2" sa1b-train --resume "$TMP/fmt" -q --steps 12
    is "$(cat "$TMP/.err")" "sa1b-train: '$f': format 'sa1b-train-$kind-2': a $([ $kind = state ] && echo "state file" || echo "model checkpoint") of another version of sa1b-train (this one reads sa1b-train-$kind-1)" \
        "the line names the format and the one this version reads"
done

# the man page says which options the record leaves out, as the code does:
# every option of --help is in a state file's record (run.KEY, KEY with
# '-' for '_'), or in the man page's "never recorded" list, or is no
# setting a resume takes (a folder, another mode, the planner); none of
# that list is recorded
sa1b-train --help | sed -n 's/^ *\(-., \)\{0,1\}\(--[a-z0-9-]*\).*/\2/p' | sort -u >"$TMP/help.opts"
grep -a -o '"run\.[a-z_0-9]*"' "$TMP/a/state-8.bin" | sed 's/"run\./--/; s/"//; s/_/-/g' | sort -u >"$TMP/rec.opts"
sed -n '/^not;$/,/are never recorded/p' "$SRC/man/sa1b-train.1" | sed -n 's/^\.Fl \(-[a-z0-9-]*\)\( ,\)\{0,1\}$/-\1/p' |
    sort -u >"$TMP/never.opts"
echo --synthetic-batch >>"$TMP/rec.opts" # (recorded by a run of synthetic batches)
sort -u -o "$TMP/rec.opts" "$TMP/rec.opts"
printf '%s\n' --help --version --out --resume --auto-resume --init --overwrite --plan --memory-budget --effective-batch --ranks \
    --eval-only --export --dump-step | sort -u >"$TMP/other.opts"
test -s "$TMP/rec.opts" && test -s "$TMP/never.opts"
ok $? "(the record's keys and the man page's list read)"
is "$(sort -u "$TMP/rec.opts" "$TMP/never.opts" "$TMP/other.opts" | comm -23 "$TMP/help.opts" - | tr '\n' ' ')" "" \
    "every option is recorded, or in the man page's never-recorded list, or no setting of a run"
is "$(comm -12 "$TMP/rec.opts" "$TMP/never.opts" | tr '\n' ' ')" "" "no option of the never-recorded list is recorded"
done_testing
