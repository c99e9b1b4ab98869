#!/bin/sh
# t1704: sa1b-train --init CKPT starts a run from another run's weights:
# loaded verbatim (an lr-0 run writes them back bit for bit), used by the
# forward whatever --seed says, repacked for bf16, kept under --freeze;
# refused with a wrong model, a missing file, a non-finite weight, --resume,
# --eval-only, --plan; a loss that overflows is null in the log.
. "$top_srcdir/tests/test-lib.sh"
PY=/usr/bin/python3
common="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 2 --synthetic-batch 11 --threads 2 -q"
run_ok "a run to start from" sa1b-train $common --steps 6 --out "$TMP/a"
W="$TMP/a/model-6.safetensors"
run_ok "--init, lr 0" sa1b-train $common --steps 2 --lr 0 --init "$W" --seed 9 --out "$TMP/b"
cmp -s "$W" "$TMP/b/model-2.safetensors"
ok $? "an lr-0 run from --init writes the weights back bit for bit"
is "$(cat "$TMP/b/latest")" "2" "the run counts its own steps from 0"
loss() { sed 's/.*"loss": \([0-9.e+-]*\),.*/\1/' "$1"; }
run_ok "dump with --init, seed 1" sa1b-train $common --dump-step "$TMP/d1" --init "$W" --seed 1
loss "$TMP/.out" >"$TMP/l.init1"
run_ok "dump with --init, seed 9" sa1b-train $common --dump-step "$TMP/d9" --init "$W" --seed 9
loss "$TMP/.out" >"$TMP/l.init9"
run_ok "dump without --init" sa1b-train $common --dump-step "$TMP/d0"
loss "$TMP/.out" >"$TMP/l.none"
run_ok "dump with --init in bf16" sa1b-train $common --dump-step "$TMP/db" --init "$W" --precision bf16
loss "$TMP/.out" >"$TMP/l.bf16"
cmp -s "$TMP/l.init1" "$TMP/l.init9"
ok $? "the forward uses the loaded weights, not those of --seed ($(cat "$TMP/l.init1"), $(cat "$TMP/l.init9"))"
awk -v a="$(cat "$TMP/l.init1")" -v b="$(cat "$TMP/l.none")" -v h="$(cat "$TMP/l.bf16")" 'BEGIN {
    d = a - b; if (d < 0) d = -d; e = a - h; if (e < 0) e = -e
    exit !(d > 1e-4 && e < d / 10) }'
ok $? "the loss moves with --init ($(cat "$TMP/l.none") -> $(cat "$TMP/l.init1")), bf16 stays near it ($(cat "$TMP/l.bf16"))"
run_ok "--init --freeze encoder" sa1b-train $common --steps 3 --init "$W" --freeze encoder --out "$TMP/f"
if [ -x "$PY" ]; then
    # names of the tensors whose bytes differ between two safetensors files
    "$PY" - "$W" "$TMP/f/model-3.safetensors" >"$TMP/changed" <<'EOF'
import json, struct, sys
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
for k in sorted(a):
    if a[k] != b.get(k):
        print(k)
EOF
    ok $? "read both checkpoints"
    ! grep -q '^enc\.' "$TMP/changed"
    ok $? "the frozen encoder keeps the loaded weights"
    grep -q '^dec\.' "$TMP/changed"
    ok $? "the decoder trains from them ($(grep -c . "$TMP/changed") tensors changed)"
else
    skip 3 "python3 missing"
fi
run_status 3 "--init of another model" sa1b-train --config tiny --batch 2 --masks 4 --synthetic-batch 11 -q \
    --steps 1 --init "$W" --out "$TMP/x"
grep_ok "model-6.safetensors': model configuration differs" "$TMP/.err" "the error names the file and the mismatch"
grep_ok "the checkpoint has( --[a-z-]+ [0-9]+ \(asked: [0-9]+\),?)+$" "$TMP/.err" \
    "and what differs, as the options that give it"
run_status 3 "--init of a missing file" sa1b-train $common --steps 1 --init "$TMP/none" --out "$TMP/x"
grep_ok "cannot open '.*none'" "$TMP/.err" "the error names the file"
printf 'not a checkpoint' >"$TMP/junk.safetensors"
run_status 3 "--init of a malformed file" sa1b-train $common --steps 1 --init "$TMP/junk.safetensors" --out "$TMP/x"
is "$(wc -l <"$TMP/.err" | tr -d ' ')" "1" "one line of error"
# weights scaled by F (standard library only): 3000 (finite, but fp16's
# forward overflows) and infinity (a damaged file)
scaled() { # F OUT
    "$PY" - "$W" "$2" "$1" <<'EOF'
import array, json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h, d = json.loads(b[8:8 + n]), bytearray(b[8 + n:])
for k, v in h.items():
    if k != "__metadata__":
        s, e = v["data_offsets"]
        a = array.array("f", bytes(d[s:e]))
        d[s:e] = array.array("f", (x * float(sys.argv[3]) for x in a)).tobytes()
open(sys.argv[2], "wb").write(b[:8 + n] + bytes(d))
EOF
}
if [ -x "$PY" ]; then
    scaled inf "$TMP/inf.safetensors"
    run_status 3 "--init of a file holding an infinite weight" sa1b-train $common --steps 1 --init "$TMP/inf.safetensors" \
        --out "$TMP/x"
    grep_ok "inf.safetensors': tensor '[a-z_.0-9]+': element 0 is infinite, not a weight$" "$TMP/.err" \
        "the error names the file, the tensor and the element"
    # a loss that overflows is null in the log (JSON has no NaN: "-nan" broke its readers)
    scaled 3000 "$TMP/big.safetensors"
    run_ok "fp16 from weights 3000 times larger (its loss overflows)" sa1b-train $common --steps 2 --log-every 1 \
        --precision fp16 --init "$TMP/big.safetensors" --out "$TMP/big"
    "$PY" -c '
import json, sys
def no(c): raise ValueError(c)
rows = [json.loads(l, parse_constant=no) for l in open(sys.argv[1])]
sys.exit(not (len(rows) == 2 and all(r["loss"] is None for r in rows)))' "$TMP/big/log.jsonl"
    ok $? "each record of the log is JSON, its loss null"
else
    skip 4 "no /usr/bin/python3"
fi
run_status 2 "--init with --resume" sa1b-train $common --init "$W" --resume "$TMP/a"
run_status 2 "--init with --eval-only" sa1b-train $common --init "$W" --eval-only "$W"
run_status 2 "--init with --plan" sa1b-train $common --init "$W" --plan
done_testing
