#!/bin/sh
# t1720: masks with no set cell at R are no pairs for sa1b-train.  On a
# shard that holds them (sa1b-shard --keep-empty-masks, as every shard made
# before the filter): the evaluation scores the other masks only and
# counts those it left out ("masks_left_out"), where each of them scored
# IoU 1 against an empty prediction; the training's loss and metrics are
# those of the shard without them (bit for bit: with one point per mask
# and every mask of an image in the batch, the same pairs and points).
. "$top_srcdir/tests/test-lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "no /usr/bin/python3"
cd "$TMP" || exit 99
# 600x400 scenes at S=64, R=16: about half of their 160 masks vanish
sa1b-synth --quiet -n 4 -W 600 -H 400 -m 40 -s 5 -o a.tar || exit 99
sa1b-shard -q --json-summary --image-size 64 --mask-size 16 --keep-empty-masks -o keep.shard a.tar >keep.json || exit 99
sa1b-shard -q --image-size 64 --mask-size 16 -o def.shard a.tar || exit 99
total=$(sed -n 's/.*"masks_kept":\([0-9]*\).*/\1/p' keep.json)
empty=$(sed -n 's/.*"masks_empty":\([0-9]*\).*/\1/p' keep.json)
[ "${empty:-0}" -gt 0 ] && [ "$empty" -lt "$total" ] || exit 99
scored=$((total - empty))

common="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --threads 2 -q"
run_ok "train 2 steps on the shard that holds them" sa1b-train $common --steps 2 --log-every 1 --batch 4 --masks 40 \
    --points 1 --data keep.shard --out k
run_ok "and on the shard without them" sa1b-train $common --steps 2 --log-every 1 --batch 4 --masks 40 \
    --points 1 --data def.shard --out d
terms() { sed 's/.*\("loss": [^,]*, "focal": [^,]*, "dice": [^,]*, "iou_mse": [^,]*, "miou": [^,]*\).*\("grad_norm": [^,]*\).*/\1 \2/' "$1"; }
terms k/log.jsonl >k.terms
terms d/log.jsonl >d.terms
cmp -s k.terms d.terms && [ "$(wc -l <k.terms)" -eq 2 ]
ok $? "the empty masks add nothing to the loss, its terms, the mIoU or the gradient"

# a model that predicts an empty mask everywhere: its mask MLP's last layer
# zero, so every logit is 0 (not > 0)
"$PY" - k/model-2.safetensors zero.safetensors <<'PYEOF' || exit 99
import json, struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", d[:8])[0]
h = json.loads(d[8:8 + n])
z = 0
for k, v in h.items():
    if k.startswith("dec.hyper.2."):
        b, e = v["data_offsets"]
        d[8 + n + b:8 + n + e] = bytes(e - b)
        z += 1
assert z == 2
open(sys.argv[2], "wb").write(d)
PYEOF
run_ok "--eval-only, the empty predictor, on the shard that holds them" sa1b-train --eval-only zero.safetensors \
    --batch 4 --masks 40 --threads 2 --val keep.shard -q
cp .out zero-keep.out
grep_ok "^\{\"miou\": 0.000000, \"masks\": $scored, \"histogram\": \[$scored, 0, 0, 0, 0, 0, 0, 0, 0, 0\], \"masks_left_out\": $empty\}$" \
    zero-keep.out "the $empty empty masks left out and counted, not scored IoU 1; the $scored others IoU 0"
run_ok "--eval-only on the shard without them" sa1b-train --eval-only zero.safetensors --batch 4 --masks 40 \
    --threads 2 --val def.shard -q
grep_ok "^\{\"miou\": 0.000000, \"masks\": $scored, .*\"masks_left_out\": 0\}$" .out "the same score, none left out"
run_ok "--eval-only, the trained model" sa1b-train --eval-only k/model-2.safetensors --batch 4 --masks 40 --threads 2 \
    --val keep.shard -q
sed 's/, "masks_left_out": [0-9]*}$/}/' .out >k.eval
run_ok "and on the shard without them" sa1b-train --eval-only k/model-2.safetensors --batch 4 --masks 40 --threads 2 \
    --val def.shard -q
sed 's/, "masks_left_out": [0-9]*}$/}/' .out >d.eval
cmp -s k.eval d.eval
ok $? "the same mIoU and histogram from both shards"
# fewer masks per image than the images have: those drawn and empty are
# left out, the others scored (masks + left out = the masks drawn)
run_ok "--eval-only --masks 8" sa1b-train --eval-only zero.safetensors --batch 4 --masks 8 --threads 2 --val keep.shard -q
m=$(sed -n 's/.*"masks": \([0-9]*\),.*/\1/p' .out)
l=$(sed -n 's/.*"masks_left_out": \([0-9]*\)}$/\1/p' .out)
[ -n "$m" ] && [ -n "$l" ] && [ "$l" -gt 0 ] && [ $((m + l)) -eq 32 ]
ok $? "--masks 8: $m scored and $l left out of the 32 drawn"
done_testing
