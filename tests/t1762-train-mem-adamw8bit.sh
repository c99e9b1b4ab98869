#!/bin/sh
# t1762: --optim adamw8bit in sa1b-train: a short run's loss falls like
# fp32 AdamW's, the 8-bit state (codes and block scales) round-trips
# through the state file so that a resumed run continues bit for bit, and
# the optimizer state takes about a quarter of the memory.
. "$top_srcdir/tests/test-lib.sh"
common="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 2 --synthetic-batch 11 --lr 2e-3 --threads 2 -q"
loss() { sed 's/.*"loss": \([0-9.e+-]*\),.*/\1/' "$1"; }
mean() { awk '{s+=$1} END {print s/NR}'; }
run_ok "AdamW 30 steps" sa1b-train $common --steps 30 --warmup 3 --log-every 1 --memory-report --out "$TMP/a"
opt32=$(sed -n 's/^optimizer *\([0-9.]*[KMG]\) .*/\1/p' "$TMP/.err")
run_ok "AdamW8bit 30 steps" sa1b-train $common --steps 30 --warmup 3 --log-every 1 --ckpt-every 10 \
    --optim adamw8bit --optim-block 256 --memory-report --out "$TMP/b"
opt8=$(sed -n 's/^optimizer *\([0-9.]*[KMG]\) .*/\1/p' "$TMP/.err")
a0=$(loss "$TMP/a/log.jsonl" | head -5 | mean); a1=$(loss "$TMP/a/log.jsonl" | tail -5 | mean)
b0=$(loss "$TMP/b/log.jsonl" | head -5 | mean); b1=$(loss "$TMP/b/log.jsonl" | tail -5 | mean)
awk -v a0="$a0" -v a1="$a1" -v b0="$b0" -v b1="$b1" 'BEGIN {exit !(b1 < 0.8 * b0 && b1 < 1.15 * a1)}'
ok $? "the loss falls comparably (AdamW $a0 -> $a1, AdamW8bit $b0 -> $b1)"
awk -v a="$opt32" -v b="$opt8" 'BEGIN {
    ua = substr(a, length(a)); ub = substr(b, length(b)); sa = 1; sb = 1
    if (ua == "M") sa = 1024; if (ub == "M") sb = 1024
    exit !((b + 0) * sb < 0.4 * (a + 0) * sa) }'
ok $? "optimizer state $opt32 -> $opt8"
mkdir -p "$TMP/c"
cp "$TMP/b/model-10.safetensors" "$TMP/b/state-10.bin" "$TMP/c/"
echo 10 >"$TMP/c/latest"
run_ok "AdamW8bit resume from step 10" sa1b-train $common --steps 30 --warmup 3 --log-every 1 --ckpt-every 10 \
    --optim adamw8bit --resume "$TMP/c"
loss "$TMP/b/log.jsonl" | tail -20 >"$TMP/b.loss"
loss "$TMP/c/log.jsonl" >"$TMP/c.loss"
cmp -s "$TMP/b.loss" "$TMP/c.loss"
ok $? "resumed AdamW8bit run continues bit for bit"
cmp -s "$TMP/b/model-30.safetensors" "$TMP/c/model-30.safetensors"
ok $? "final checkpoint bit-identical after resume"
mkdir -p "$TMP/d"
cp "$TMP/b/model-10.safetensors" "$TMP/b/state-10.bin" "$TMP/d/"
echo 10 >"$TMP/d/latest"
run_status 2 "an 8-bit run does not resume as fp32 AdamW" sa1b-train $common --steps 30 --optim adamw --resume "$TMP/d"
grep_ok "which has --optim adamw8bit" "$TMP/.err" "the error names the run's optimizer"
run_ok "without --optim the run's record says adamw8bit" sa1b-train $common --steps 30 --resume "$TMP/d"
cmp -s "$TMP/b/model-30.safetensors" "$TMP/d/model-30.safetensors"
ok $? "and the run continues bit for bit"
run_ok "--optim-block 2048" sa1b-train $common --steps 3 --optim adamw8bit --optim-block 2048 --out "$TMP/e"
run_status 2 "--optim sgd" sa1b-train $common --steps 3 --optim sgd --out "$TMP/f"
run_status 2 "--optim-block 512" sa1b-train $common --steps 3 --optim adamw8bit --optim-block 512 --out "$TMP/f"
done_testing
