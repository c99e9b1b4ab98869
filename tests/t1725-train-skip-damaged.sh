#!/bin/sh
# t1725: a damaged sample (one byte of one image's JPEG changed: its CRC32C
# fails) ends a run in one line that names the shard to rebuild and
# --skip-damaged, and says the image once; with --skip-damaged the run goes
# on, the image's row of the batch in place with every pair invalid: said
# in a line each time it is read, counted in the step's record, and the
# run bit-identical to one on the same shards where that image has no mask
# at all (every other sample in its slot, the stream and its order as they
# were), resumed bit for bit; --dump-step shows the row in place.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null || skip_all "sa1b-synth or sa1b-shard not built"
PY=/usr/bin/python3
common="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --batch 4 --masks 4 --points 2 --threads 2 -q"
shard="sa1b-shard -q --image-size 64 --mask-size 16 --image-format jpeg"

# damage SHARD K: one byte of the JPEG of image K of SHARD changed
damage() {
    off=$(sa1b-inspect "$1" | sed -n "s/.*\"index\": $2, .*\"image_offset\": \([0-9]*\),.*/\1/p")
    pos=$((off + 100))
    b=$(od -An -tu1 -j $pos -N1 "$1" | tr -d ' ')
    # shellcheck disable=SC2059
    printf "\\$(printf %o $(((b + 1) % 256)))" | dd of="$1" bs=1 seek=$pos conv=notrunc 2>/dev/null
}

# the issue's case: image 3 (id 1004) of one shard of 12
sa1b-synth -n 12 -W 240 -H 160 -m 10 -s 1 --first-id 1001 -o "$TMP/t.tar" --quiet &&
    $shard -o "$TMP/good.shard" "$TMP/t.tar" || exit 99
cp "$TMP/good.shard" "$TMP/flip.shard" && damage "$TMP/flip.shard" 3
run_status 3 "without --skip-damaged: the run ends at the damaged sample (exit 3)" \
    sa1b-train $common --data "$TMP/flip.shard" --steps 20 --out "$TMP/rF"
grep -v "^sa1b-train: step [0-9]* failed: checkpoint of step [0-9]* written" "$TMP/.err" >"$TMP/why"
is "$(wc -l <"$TMP/why" | tr -d ' ')" "1" "one line says why (beside the line of the checkpoint saved)"
grep_ok "^sa1b-train: '$TMP/flip.shard' image 3 \(id 1004\): payload at offset [0-9]+: CRC32C 0x[0-9a-f]{8} != stored 0x[0-9a-f]{8}: a damaged sample \(rebuild '$TMP/flip.shard' with sa1b-shard, or give --skip-damaged to leave its pairs out and go on\)$" \
    "$TMP/why" "naming the image, the shard to rebuild and --skip-damaged"
is "$(grep -o 'image 3 (id 1004)' "$TMP/why" | wc -l | tr -d ' ')" "1" "the image said once"

run_ok "with --skip-damaged: the run goes on to its end" \
    sa1b-train $common --data "$TMP/flip.shard" --steps 20 --log-every 1 --out "$TMP/rS" --skip-damaged
is "$(cat "$TMP/rS/latest")" "20" "its last checkpoint written"
grep -c "^sa1b-train: '$TMP/flip.shard' image 3 (id 1004): payload at offset [0-9]*: CRC32C 0x[0-9a-f]* != stored 0x[0-9a-f]*: a damaged sample, its pairs left out (--skip-damaged)$" \
    "$TMP/.err" >"$TMP/n.lines"
n=$(cat "$TMP/n.lines")
[ "$n" -ge 2 ] && [ "$(wc -l <"$TMP/.err" | tr -d ' ')" = "$n" ]
ok $? "each read of it (one an epoch: $n) said in one line, nothing else"
is "$(grep -o '"damaged": [0-9]*' "$TMP/rS/log.jsonl" | awk '{s += $2} END {print s}')" "$n" \
    "the log's records count them (\"damaged\")"
is "$(grep -c '"damaged"' "$TMP/rS/log.jsonl")" "$n" "in the records of the steps that read it, and no other"
run_ok "the run that stopped there, resumed with --skip-damaged" sa1b-train --resume "$TMP/rF" -q --skip-damaged
cmp -s "$TMP/rF/model-20.safetensors" "$TMP/rS/model-20.safetensors"
ok $? "ends bit-identical to the run that had --skip-damaged from the start"

# bit for bit: the damaged image (its own shard: 1 of 12 images) against the
# same image with no mask (every pair invalid), the other shard the same
sa1b-synth -n 11 -W 240 -H 160 -m 10 -s 2 --first-id 1 -o "$TMP/a.tar" --quiet &&
    sa1b-synth -n 1 -W 240 -H 160 -m 0 -s 3 --first-id 2001 -o "$TMP/z.tar" --quiet || exit 99
mkdir "$TMP/g" "$TMP/d" && $shard -o "$TMP/g/a.shard" "$TMP/a.tar" && $shard -o "$TMP/g/z.shard" "$TMP/z.tar" || exit 99
cp "$TMP/g/a.shard" "$TMP/g/z.shard" "$TMP/d/" && damage "$TMP/d/z.shard" 0
run="$common --steps 9 --log-every 1 --ckpt-every 3"
run_ok "a run where the image has no mask" sa1b-train $run --data "$TMP/g/*.shard" --out "$TMP/rg"
run_ok "the run where it is damaged, with --skip-damaged" sa1b-train $run --data "$TMP/d/*.shard" --out "$TMP/rd" \
    --skip-damaged
[ "$(grep -c 'a damaged sample, its pairs left out' "$TMP/.err")" -ge 1 ]
ok $? "(which read it)"
cmp -s "$TMP/rg/model-9.safetensors" "$TMP/rd/model-9.safetensors"
ok $? "the same weights, bit for bit"
sed 's/"images_per_s.*//' "$TMP/rg/log.jsonl" >"$TMP/g.loss"
sed 's/"images_per_s.*//' "$TMP/rd/log.jsonl" >"$TMP/d.loss"
cmp -s "$TMP/g.loss" "$TMP/d.loss"
ok $? "the same losses, mIoU, learning rates and gradient norms at every step"
mkdir "$TMP/rr" && cp "$TMP/rd/model-3.safetensors" "$TMP/rd/state-3.bin" "$TMP/rr/" && echo 3 >"$TMP/rr/latest" &&
    head -3 "$TMP/rd/log.jsonl" >"$TMP/rr/log.jsonl"
run_ok "resumed from step 3 with --skip-damaged" sa1b-train --resume "$TMP/rr" -q --skip-damaged
cmp -s "$TMP/rd/model-9.safetensors" "$TMP/rr/model-9.safetensors" && cmp -s "$TMP/rd/state-9.bin" "$TMP/rr/state-9.bin"
ok $? "the resumed run ends bit-identical"
sed 's/"images_per_s.*//' "$TMP/rr/log.jsonl" | cmp -s - "$TMP/d.loss"
ok $? "and so do its records"

# data parallel: each rank its slice of the global batch, as without the damage
if command -v mpirun >/dev/null; then
    mpi_env
    dp="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 2 --threads 1 -q"
    dp="$dp --steps 6 --log-every 1 --ckpt-every 6"
    mpirun --oversubscribe --bind-to none -np 2 sa1b-train $dp --data "$TMP/g/*.shard" --out "$TMP/pg" >/dev/null 2>&1 &&
        mpirun --oversubscribe --bind-to none -np 2 sa1b-train $dp --data "$TMP/d/*.shard" --out "$TMP/pd" \
            --skip-damaged >/dev/null 2>"$TMP/pd.err"
    ok $? "mpirun -np 2: the run where it is damaged, with --skip-damaged"
    cmp -s "$TMP/pg/model-6.safetensors" "$TMP/pd/model-6.safetensors"
    ok $? "the same weights as the job where it has no mask, bit for bit"
    n=$(grep -c "^sa1b-train: rank [01]: '$TMP/d/z.shard' image 0 (id 2001): .*: a damaged sample, its pairs left out (--skip-damaged)$" "$TMP/pd.err")
    is "$(grep -o '"damaged": [0-9]*' "$TMP/pd/log.jsonl" | awk '{s += $2} END {print s + 0}')" "$n" \
        "the records count every rank's ($n, each said by its rank)"
    [ "$n" -ge 1 ]
    ok $? "(the job read it)"
else
    skip 4 "no mpirun"
fi

# the batch itself: the damaged image's row in place, every other row as
# the intact shard gives it
if [ -x $PY ]; then
    dump="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --batch 12 --masks 4 --points 2 --threads 2"
    run_ok "--dump-step of the intact shard" sa1b-train $dump --data "$TMP/good.shard" --dump-step "$TMP/g.dump"
    run_ok "--dump-step of the damaged one with --skip-damaged" sa1b-train $dump --data "$TMP/flip.shard" \
        --dump-step "$TMP/d.dump" --skip-damaged
    r=$($PY - "$TMP/g.dump" "$TMP/d.dump" <<'EOF'
import json, struct, sys
def rows(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k in ("in.image", "in.masks", "in.valid", "in.points", "in.labels"):
        b, e = head[k]["data_offsets"]
        B = head[k]["shape"][0]
        t = data[b:e]
        out[k] = [t[i * len(t) // B:(i + 1) * len(t) // B] for i in range(B)]
    return out
g, d = rows(sys.argv[1]), rows(sys.argv[2])
diff = {k: [i for i in range(len(g[k])) if g[k][i] != d[k][i]] for k in g}
r = diff["in.valid"]
same = all(v == r for v in diff.values()) and len(r) == 1
print("row %s" % r[0] if same and not any(d["in.valid"][r[0]]) and any(g["in.valid"][r[0]]) else "differ: %s" % diff)
EOF
    )
    case $r in
        row*) ok 0 "the batch differs in one row ($r): its pairs invalid, image and masks gone; every other row equal" ;;
        *) ok 1 "the batch differs in one row: $r" ;;
    esac
else
    skip 3 "no /usr/bin/python3"
fi
done_testing
