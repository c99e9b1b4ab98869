#!/bin/sh
# t1750: the computation features of sa1b-train (issue 7 part A) from the
# command line: usage errors; --checkpoint-every / --checkpoint-decoder give
# bit-identical debug dumps (fp32 and bf16, also with decoder chunks that
# straddle images and end short); bf16 and fp16 dumps against the
# PyTorch reference with precision-dependent tolerances (skipped without
# python3-torch); fp16 loss scaling logged; a run with every feature
# (fp16, accumulation, checkpointing, freezing, unfreezing, stage batch)
# resumed from a checkpoint continues bit for bit.
. "$top_srcdir/tests/test-lib.sh"
tiny="--config tiny --batch 2 --masks 3 --points 2 --synthetic-batch 5 --seed 3 --threads 2"

# usage errors (exit 2)
for bad in "--precision fp8" "--accum 0" "--checkpoint-every 3" "--freeze bogus" "--freeze encoder,"
do
    run_status 2 "usage error: $bad" sa1b-train $tiny --out "$TMP/u" $bad
done
run_status 2 "usage error: --freeze all" sa1b-train $tiny --out "$TMP/u" --freeze all
run_status 2 "usage error: --unfreeze without --freeze" sa1b-train $tiny --out "$TMP/u" --unfreeze 5:neck
run_status 2 "usage error: --unfreeze steps not increasing" sa1b-train $tiny --out "$TMP/u" --freeze encoder \
    --unfreeze 5:neck,5:all
run_status 2 "usage error: --unfreeze without a colon" sa1b-train $tiny --out "$TMP/u" --freeze encoder \
    --unfreeze 5neck
run_status 2 "usage error: --unfreeze bad group" sa1b-train $tiny --out "$TMP/u" --freeze encoder \
    --unfreeze 5:blocks.1-2
grep_ok "blocks.1-2" "$TMP/.err" "the error names the group"
run_status 2 "usage error: --stage-batch not dividing the effective batch" sa1b-train $tiny --out "$TMP/u" \
    --accum 2 --stage-batch 3:3

# checkpointing: bit-identical dumps (gradients, outputs, loss)
for p in fp32 bf16; do
    run_ok "$p dump" sa1b-train $tiny --precision $p --dump-step "$TMP/d-$p.st"
    run_ok "$p dump, checkpointed" sa1b-train $tiny --precision $p --checkpoint-every 1 --checkpoint-decoder \
        --dump-step "$TMP/c-$p.st"
    cmp -s "$TMP/d-$p.st" "$TMP/c-$p.st"
    ok $? "$p: --checkpoint-every 1 --checkpoint-decoder dump is bit-identical"
done
# a geometry whose decoder chunks (4 pairs) straddle images and end short
# (3 images x 5 masks = 15 pairs): bit-identical too, and right (PyTorch below)
odd="--config tiny --batch 3 --masks 5 --points 2 --synthetic-batch 6 --seed 3 --threads 2"
for p in fp32 bf16; do
    run_ok "$p dump, 3 x 5 pairs" sa1b-train $odd --precision $p --dump-step "$TMP/o-$p.st"
    run_ok "$p dump, 3 x 5 pairs, checkpointed" sa1b-train $odd --precision $p --checkpoint-every 1 \
        --checkpoint-decoder --dump-step "$TMP/oc-$p.st"
    cmp -s "$TMP/o-$p.st" "$TMP/oc-$p.st"
    ok $? "$p, 3 x 5 pairs: the checkpointed dump is bit-identical"
done
run_ok "fp16 dump" sa1b-train $tiny --precision fp16 --dump-step "$TMP/d-fp16.st"
cmp -s "$TMP/d-fp32.st" "$TMP/d-bf16.st"
ok $((! $?)) "the bf16 dump differs from the fp32 one"

# against PyTorch in fp32 (the reference computes in float64): tolerances
# grow with the 16-bit format's precision (bf16 8 bits, fp16 11 bits)
PY=/usr/bin/python3
if [ -x $PY ] && $PY -c 'import torch, numpy' 2>/dev/null; then
    $PY "$SRC/tests/reference/sam_ref.py" --threads 2 --tol-loss 1e-2 --tol-grad 0.3 "$TMP/d-bf16.st" \
        >"$TMP/ref-bf16.out" 2>&1
    ok $? "bf16 dump agrees with PyTorch (loss 1e-2, outputs and gradients 0.3 relative)"
    sed 's/^/# /' "$TMP/ref-bf16.out" | grep -v '^# ok'
    $PY "$SRC/tests/reference/sam_ref.py" --threads 2 --tol-loss 1e-3 --tol-grad 2e-2 "$TMP/d-fp16.st" \
        >"$TMP/ref-fp16.out" 2>&1
    ok $? "fp16 dump agrees with PyTorch (loss 1e-3, outputs and gradients 2e-2 relative)"
    sed 's/^/# /' "$TMP/ref-fp16.out" | grep -v '^# ok'
    $PY "$SRC/tests/reference/sam_ref.py" --threads 2 "$TMP/o-fp32.st" >"$TMP/ref-odd.out" 2>&1
    ok $? "fp32 dump of 3 x 5 pairs agrees with PyTorch (t1700's tolerances)"
    sed 's/^/# /' "$TMP/ref-odd.out" | grep -v '^# ok'
else
    skip 3 "python3-torch not installed"
fi

# fp16 loss scale: doubles after each window of clean steps, logged
run_ok "fp16 training" sa1b-train $tiny -q --steps 4 --log-every 1 --precision fp16 --loss-scale-window 2 \
    --out "$TMP/f"
is "$(grep -o '"scale": [0-9]*' "$TMP/f/log.jsonl" | sed 's/.*: //' | tr '\n' ' ')" "65536 131072 131072 262144 " \
    "scale doubles every 2 clean steps"

# training with --checkpoint-decoder runs each decoder chunk's backward right
# after its forward (tr_model_step): the same models as without checkpointing
for p in fp32 bf16; do
    run_ok "$p: 3 training steps" sa1b-train $odd -q --steps 3 --ckpt-every 3 --accum 2 --precision $p \
        --out "$TMP/t-$p"
    run_ok "$p: 3 training steps, checkpointed" sa1b-train $odd -q --steps 3 --ckpt-every 3 --accum 2 \
        --precision $p --checkpoint-every 1 --checkpoint-decoder --out "$TMP/tc-$p"
    cmp -s "$TMP/t-$p/model-3.safetensors" "$TMP/tc-$p/model-3.safetensors"
    ok $? "$p: the checkpointed training ends with a bit-identical model"
done
run_ok "bf16: 3 training steps, checkpointed, 1 thread" sa1b-train $odd -q --steps 3 --ckpt-every 3 --accum 2 \
    --precision bf16 --checkpoint-every 1 --checkpoint-decoder --threads 1 --out "$TMP/tc1"
cmp -s "$TMP/tc-bf16/model-3.safetensors" "$TMP/tc1/model-3.safetensors"
ok $? "bf16, checkpointed: 1 and 2 threads train the same model"

# every feature at once, resumed at step 4 of 8 (stages at 3 and 5)
all="$tiny -q --steps 8 --log-every 1 --ckpt-every 4 --precision fp16 --loss-scale-window 3 --accum 2
     --checkpoint-every 1 --checkpoint-decoder --freeze encoder --unfreeze 3:neck,5:all --stage-batch 3:1,5:4"
run_ok "all features, 8 steps" sa1b-train $all --out "$TMP/a"
mkdir -p "$TMP/b"
cp "$TMP/a/model-4.safetensors" "$TMP/a/state-4.bin" "$TMP/b/"
echo 4 >"$TMP/b/latest"
run_ok "resume at step 4" sa1b-train $all --resume "$TMP/b"
sed -n '5,8p' "$TMP/a/log.jsonl" | sed 's/"images_per_s.*"step_s": [0-9.]*//' >"$TMP/a.tail"
sed 's/"images_per_s.*"step_s": [0-9.]*//' "$TMP/b/log.jsonl" >"$TMP/b.tail"
cmp -s "$TMP/a.tail" "$TMP/b.tail"
ok $? "the resumed run logs the same losses, norms and scales"
cmp -s "$TMP/a/model-8.safetensors" "$TMP/b/model-8.safetensors"
ok $? "and ends with a bit-identical model"
done_testing
