#!/bin/sh
# t1764: running out of memory is an error, never an abort, a hang, or a
# file written from the planner's run (a resume, --eval-only, --dump-step,
# --unfreeze included).
# --memory-limit below the planner's peak stops the run in the middle of a
# step with exit 3 and one line naming the category and the planner's
# micro-batch, which then trains under the same limit; at the planner's
# peak reserved bytes exactly the run trains.  Under `ulimit -v` at limits
# from the planner's peak to twice it, every run ends within a minute with
# exit 0 or 3 (one line), never spinning in the BLAS.  A second SIGTERM
# ends a run at once.
. "$top_srcdir/tests/test-lib.sh"
tiny="--config tiny --batch 4 --masks 4 --points 2 --synthetic-batch 1 --precision bf16 --threads 2 -q"
peak=$(sa1b-train $tiny --plan | sed -n 's/^predicted: .*peak_reserved=\([0-9]*\).*/\1/p')
[ -n "$peak" ] && [ "$peak" -gt 0 ]
ok $? "the planner's peak reserved: $peak bytes"

run_status 3 "--memory-limit one byte below the peak: exit 3" \
    sa1b-train $tiny --steps 2 --out "$TMP/a" --memory-limit $((peak - 1))
is "$(wc -l < "$TMP/.err" | tr -d ' ')" 1 "one line on stderr"
grep_ok '^sa1b-train: out of memory: workspace of .* could not be allocated under --memory-limit; the planner.s largest micro-batch for .* is --batch [0-9]+' \
    "$TMP/.err" "it names the category (the step's workspace) and the planner's micro-batch"
b=$(sed -n 's/.* is --batch \([0-9]*\) .*/\1/p' "$TMP/.err")
run_ok "the suggested --batch ${b:-?} trains under the same limit" \
    sa1b-train $tiny --batch "${b:-0}" --steps 2 --out "$TMP/b" --memory-limit $((peak - 1))
run_ok "at the planner's peak exactly the run trains" \
    sa1b-train $tiny --steps 2 --out "$TMP/c" --memory-limit "$peak"
# with --val as well, at the planner's peak exactly the run trains and
# evaluates (before: the --val check's loader buffers stayed cached, and the
# evaluation's model came beside the training's: exit 3, "out of memory")
if command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null; then
    sa1b-synth -n 8 -W 240 -H 160 -m 6 -s 4 -o "$TMP/v.tar" --quiet &&
        sa1b-shard -q --image-size 64 --mask-size 16 -o "$TMP/v.shard" "$TMP/v.tar" || exit 99
    vt="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 1 --synthetic-batch 1
        --threads 2 -q --steps 3"
    vpeak=$(sa1b-train $vt --val "$TMP/v.shard" --plan | sed -n 's/^predicted: .*peak_reserved=\([0-9]*\).*/\1/p')
    run_ok "--val at the planner's peak: trains and evaluates" \
        sa1b-train $vt --val "$TMP/v.shard" --out "$TMP/cv" --memory-limit "${vpeak:-0}"
    grep_ok '^\{"miou": ' "$TMP/.out" "the evaluation's line"
else
    skip 2 "sa1b-synth or sa1b-shard not built"
fi
run_status 2 "--memory-limit takes a size" sa1b-train $tiny --steps 2 --out "$TMP/d" --memory-limit 12Q
run_status 2 "--memory-limit is not for --plan" sa1b-train $tiny --plan --memory-limit 1G

# a resumed run out of memory: the same line (the planner's run of 3 steps
# once took the run's --resume and ended "--steps 3 is below step 4", exit
# 2, where its line and its checkpoint should have been)
run_ok "4 steps" sa1b-train $tiny --steps 4 --out "$TMP/r"
run_status 3 "resumed under --memory-limit one byte below the peak: exit 3" \
    sa1b-train --resume "$TMP/r" -q --steps 8 --memory-limit $((peak - 1))
grep_ok '^sa1b-train: out of memory: .* under --memory-limit; the planner.s largest micro-batch for .* is --batch [0-9]+' \
    "$TMP/.err" "it names the category and the planner's micro-batch"
is "$(wc -l < "$TMP/.err" | tr -d ' ')" 1 "in one line"

# --eval-only out of memory: one line, exit 3 (the planner of its line
# once read the checkpoint into its model that holds no memory: SIGSEGV)
run_status 3 "--eval-only under --memory-limit 1M: exit 3" \
    sa1b-train $tiny --eval-only "$TMP/r/model-4.safetensors" --memory-limit 1M
grep_ok "^sa1b-train: out of memory for .* under --memory-limit; (no micro-batch|the planner.s)" "$TMP/.err" \
    "it names the category and what fits"
is "$(wc -l < "$TMP/.err" | tr -d ' ')" 1 "in one line"

# --dump-step out of memory: one line, exit 3, nothing on stdout, and an
# earlier dump that --overwrite would replace stays as it was (the
# planner's run of the line once wrote its own dump of the model that
# holds no memory over it, and printed its loss)
run_ok "a dump" sa1b-train $tiny --dump-step "$TMP/d.st"
cksum <"$TMP/d.st" >"$TMP/d.sum"
run_status 3 "--dump-step --overwrite under --memory-limit 1M: exit 3" \
    sa1b-train $tiny --dump-step "$TMP/d.st" --overwrite --memory-limit 1M
is "$(wc -l < "$TMP/.err" | tr -d ' ')" 1 "in one line"
is "$(cat "$TMP/.out")" "" "nothing on stdout"
cksum <"$TMP/d.st" | cmp -s - "$TMP/d.sum"
ok $? "the earlier dump is unchanged"
run_status 3 "--dump-step of a new file under --memory-limit 1M: exit 3" \
    sa1b-train $tiny --dump-step "$TMP/n.st" --memory-limit 1M
test ! -e "$TMP/n.st"
ok $? "no dump is written"

# --unfreeze at step 6 that runs out of memory (the gradients, activations
# and optimizer state of the group) saves steps 5 and 6 first, as a failed
# step does (t1716), and --resume ends the run; before: exit 3 with steps
# 5 and 6 lost (latest 4), no micro-batch suggested
fr="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 1 --synthetic-batch 1
    --threads 2 -q --freeze encoder --unfreeze 6:all --steps 8 --ckpt-every 4"
run_status 130 "a run with --unfreeze 6:all, stopped at step 4" env SA1B_TEST_KILL=step:4 sa1b-train $fr \
    --out "$TMP/f" --ckpt-every 100
cp -r "$TMP/f" "$TMP/fref" && sa1b-train --resume "$TMP/fref" -q || exit 99 # (the run that never failed)
fpeak=$(sa1b-train $fr --plan | sed -n 's/^predicted: .*peak_reserved=\([0-9]*\).*/\1/p')
for cat in gradients optimizer; do
    case $cat in gradients) lim=4M ;; optimizer) lim=6M ;; esac
    rm -rf "$TMP/f$cat" && cp -r "$TMP/f" "$TMP/f$cat"
    run_status 3 "--unfreeze out of memory for the $cat: exit 3" \
        sa1b-train --resume "$TMP/f$cat" -q --memory-limit $lim
    grep_ok "^sa1b-train: out of memory for the $cat under --memory-limit; .*--batch [0-9]+ .*|^sa1b-train: out of memory for $cat under --memory-limit; no micro-batch" \
        "$TMP/.err" "$cat: the line names the category and what fits"
    grep_ok "^sa1b-train: step 7 failed: checkpoint of step 6 written \(--resume $TMP/f$cat goes on from it\)$" \
        "$TMP/.err" "$cat: the steps since the last checkpoint are saved"
    is "$(cat "$TMP/f$cat/latest")" 6 "$cat: latest names step 6"
    run_ok "$cat: --resume ends the run" sa1b-train --resume "$TMP/f$cat" -q
    cmp -s "$TMP/f$cat/model-8.safetensors" "$TMP/fref/model-8.safetensors"
    ok $? "$cat: and ends with the model of a run that never failed"
done
# a --stage-batch whose micro-batch does not fit: the line names the
# micro-batch that does, as any out of memory does (before: none)
sb="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --batch 2 --accum 2 --masks 4 --points 1
    --synthetic-batch 1 --threads 2 -q --stage-batch 6:4 --steps 8"
run_status 130 "a run with --stage-batch 6:4, stopped at step 4" env SA1B_TEST_KILL=step:4 sa1b-train $sb --out "$TMP/sb"
run_status 3 "--stage-batch out of memory: exit 3" sa1b-train --resume "$TMP/sb" -q --memory-limit 6M
grep_ok "^sa1b-train: --stage-batch: out of memory for .* under --memory-limit; the planner.s largest micro-batch for .* is --batch [0-9]+" \
    "$TMP/.err" "--stage-batch: the line names the category and the micro-batch that fits"
grep_ok "^sa1b-train: step 7 failed: checkpoint of step 6 written" "$TMP/.err" "--stage-batch: the steps are saved"
run_ok "the planner's peak for --unfreeze is the unfrozen run's: under it, the run trains to its end" \
    sa1b-train $fr --out "$TMP/fp" --memory-limit "${fpeak:-0}"

# ulimit -v: the small model at B=8 (OpenBLAS spins on a refused buffer:
# the run must refuse first).  AddressSanitizer maps terabytes of shadow.
if grep -q __asan_init "$BUILD/trainer/sa1b-train" 2>/dev/null || ! command -v timeout >/dev/null; then
    skip 11 "ulimit -v: not under AddressSanitizer"
else
    small="--config small --batch 8 --masks 16 --synthetic-batch 1 --threads 2 -q --steps 1"
    sp=$(sa1b-train $small --plan | sed -n 's/^predicted: .*peak_reserved=\([0-9]*\).*/\1/p')
    first=""
    for f in 100 125 150 175 200; do
        kb=$((sp / 1024 * f / 100))
        (ulimit -v $kb && exec timeout -s KILL 60 sa1b-train $small --out "$TMP/u$f") >"$TMP/u$f.out" 2>"$TMP/u$f.err"
        rc=$?
        [ -z "$first" ] && first=$rc
        lines=$(wc -l < "$TMP/u$f.err" | tr -d ' ')
        { [ $rc -eq 0 ] && [ "$lines" -eq 0 ]; } ||
            { [ $rc -eq 3 ] && [ "$lines" -eq 1 ] && grep -Eq 'ulimit -v|out of memory' "$TMP/u$f.err"; }
        ok $? "ulimit -v ${kb}K ($f% of the planner's peak): exit $rc within a minute, $lines line(s)"
        [ $rc -eq 3 ] && sed 's/^/# /' "$TMP/u$f.err"
    done
    is "$first" 3 "at the planner's peak the address space cannot hold the run: exit 3"
    # a resume (at step 2, and at step 4: past the planner's 3 steps) and
    # an --init under ulimit -v: the address-space check's planner took the
    # checkpoint (a crash, SIGSEGV) or --resume's step (exit 2)
    for at in 2 4; do
        run_ok "$at steps" sa1b-train $tiny --steps $at --out "$TMP/v$at"
        (ulimit -v 1500000 && exec timeout -s KILL 120 sa1b-train --resume "$TMP/v$at" -q --steps 6) 2>"$TMP/v$at.err"
        is "$?" 0 "under ulimit -v 1500000: the resume at step $at trains"
        sed 's/^/# /' "$TMP/v$at.err"
    done
    (ulimit -v 1500000 && exec timeout -s KILL 120 sa1b-train $tiny --steps 2 --init "$TMP/v4/model-4.safetensors" \
        --out "$TMP/vi") 2>"$TMP/vi.err"
    is "$?" 0 "under ulimit -v 1500000: a run from --init trains"
    sed 's/^/# /' "$TMP/vi.err"
fi

# a second SIGTERM ends the run at once (the first waits for the step).
# Signals of one kind do not queue, so the second is sent 50 ms after the
# first; should the step end in between (a clean exit 130), try again.
rc=""
for try in 1 2 3; do
    rm -rf "$TMP/s"
    sa1b-train --config small --batch 8 --synthetic-batch 1 --threads 2 -q --steps 100000 --out "$TMP/s" 2>"$TMP/s.err" &
    pid=$!
    n=0
    while [ ! -s "$TMP/s/log.jsonl" ] && [ $n -lt 600 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; n=$((n + 1)); done
    kill -TERM $pid; sleep 0.05; kill -TERM $pid 2>/dev/null
    wait $pid
    rc=$?
    [ $rc -eq 130 ] || break
done
is "$rc" 143 "two SIGTERMs: killed by the second (exit 143; try $try)"
done_testing
