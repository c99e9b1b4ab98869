#!/bin/sh
# t1564: the real SA-1B annotation sa_226381.json (2000x1500, 113 masks,
# from ../shared/data/sa1b-real) beside a synthetic JPEG of that size: 13
# of its masks have no set cell at R = 64 (S = 256), 56 at R = 32 (S =
# 128); sa1b-shard drops them before --max-masks and counts them, keeps
# them with --keep-empty-masks, and sa1b-train --eval-only leaves them out
# of the score of a shard that holds them.
. "$top_srcdir/tests/test-lib.sh"
PY=/usr/bin/python3
[ -n "$SHARED_DATA" ] && [ -f "$SHARED_DATA/sa_226381.json" ] ||
    skip_all "no real SA-1B annotations in ../shared/data/sa1b-real"
[ -x "$PY" ] || skip_all "no /usr/bin/python3"
cd "$TMP" || exit 99
sa1b-synth --quiet -n 1 -W 2000 -H 1500 -m 1 --first-id 226381 -o synth-real.tar || exit 99
"$PY" - synth-real.tar "$SHARED_DATA/sa_226381.json" real.tar <<'PYEOF' || exit 99
import io, sys, tarfile
with tarfile.open(sys.argv[1]) as t, tarfile.open(sys.argv[3], "w") as out:
    for m in t.getmembers():
        data = t.extractfile(m).read()
        if m.name.endswith(".json"):
            data = open(sys.argv[2], "rb").read()
            m.size = len(data)
        out.addfile(m, io.BytesIO(data))
PYEOF
jkey() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$2"; }
prov() { sa1b-inspect "$1" | head -1 | sed -n "s/.*\"$2\": \([a-z0-9]*\).*/\1/p"; }
# masks of a shard without a set cell (sa1b-inspect --rle)
empty_in() {
    sa1b-inspect --rle "$1" | "$PY" -c '
import json, sys
sys.path.insert(0, sys.argv[1])
import coco_rle
print(sum(sum(coco_rle.runs(o["mask_rle"]["counts"])[1::2]) == 0
          for o in map(json.loads, sys.stdin) if o["type"] == "mask"))' "$SRC/tests"
}
for spec in "256 64 13" "128 32 56"; do
    set -- $spec
    run_ok "S=$1 (R=$2)" sa1b-shard -q --json-summary --image-size "$1" -o "d$1.shard" real.tar
    is "$(jkey masks_kept .out) $(jkey masks_dropped .out) $(jkey masks_empty .out)" "$((113 - $3)) $3 $3" \
        "R=$2: the $3 masks empty at R dropped, the other $((113 - $3)) kept"
    is "$(prov "d$1.shard" masks_empty_dropped) $(empty_in "d$1.shard")" "$3 0" \
        "R=$2: the provenance counts them, the shard holds none"
    run_ok "S=$1, --keep-empty-masks" sa1b-shard -q --json-summary --image-size "$1" --keep-empty-masks \
        -o "k$1.shard" real.tar
    is "$(jkey masks_kept .out) $(jkey masks_empty .out) $(prov "k$1.shard" masks_empty_kept) $(empty_in "k$1.shard")" \
        "113 $3 $3 $3" "R=$2, --keep-empty-masks: all 113 kept, the $3 counted"
done
# --max-masks counts masks that are there
run_ok "S=128 --max-masks 50" sa1b-shard -q --json-summary --image-size 128 --max-masks 50 -o m50.shard real.tar
is "$(jkey masks_kept .out) $(empty_in m50.shard)" "50 0" "--max-masks 50 at R=32: 50 masks, none empty"
run_ok "S=128 --max-masks 64" sa1b-shard -q --json-summary --image-size 128 --max-masks 64 -o m64.shard real.tar
is "$(jkey masks_kept .out)" 57 "--max-masks 64 at R=32: the 57 masks with a cell"

# the evaluation of the shard that holds them (an untrained tiny model at
# S=128, R=32): the 56 left out and counted, the 57 scored
run_ok "a tiny model" sa1b-train --config tiny --steps 1 --batch 1 --masks 1 --synthetic-batch 1 --threads 2 \
    --out model -q
run_ok "--eval-only on the --keep-empty-masks shard" sa1b-train --eval-only model/model-1.safetensors --batch 1 \
    --masks 113 --threads 2 --val k128.shard -q
grep_ok '^\{"miou": [0-9.]+, "masks": 57, "histogram": \[.*\], "masks_left_out": 56\}$' .out \
    "57 masks scored, 56 left out"
run_ok "--eval-only on the default shard" sa1b-train --eval-only model/model-1.safetensors --batch 1 \
    --masks 113 --threads 2 --val d128.shard -q
grep_ok '"masks": 57, .*"masks_left_out": 0\}$' .out "the same 57 scored, none to leave out"
done_testing
