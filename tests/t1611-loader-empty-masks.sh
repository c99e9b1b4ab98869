#!/bin/sh
# t1611: the loader's rule for masks at the mask resolution R, whatever
# the shard: a mask with no set cell at R is no valid pair (valid 0, all
# its points padding, its id kept), so point 0 of every valid pair is a
# positive point inside its mask; a negative point with no cell outside
# the mask to land on (a mask covering the whole content) is padding.
# Scenes get three masks more per image: one covering the whole image,
# one of a single pixel and one of a 3 x 3 square (both vanish at R = 16);
# sa1b-shard --keep-empty-masks keeps them, as every shard made before it
# dropped them did; also from a shard of source-size masks read at R = 16.
# Read through the Python package (sa1b.Loader, the loader of sa1b-train).
. "$top_srcdir/tests/test-lib.sh"
. "$SRC/python/tests/py-lib.sh"
cd "$TMP" || exit 99
sa1b-synth --quiet -n 5 -W 240 -H 160 -m 8 -s 3 -o a.tar || exit 99
# plain Python: the tar with the three masks added to every annotation
"$PY" - a.tar b.tar "$SRC/tests" <<'PYEOF' || exit 99
import io, json, sys, tarfile
sys.path.insert(0, sys.argv[3])
import coco_rle
with tarfile.open(sys.argv[1]) as t, tarfile.open(sys.argv[2], "w") as out:
    for m in t.getmembers():
        data = t.extractfile(m).read()
        if m.name.endswith(".json"):
            d = json.loads(data)
            W, H = d["image"]["width"], d["image"]["height"]
            base = d["annotations"][0]
            def add(k, runs, area, bbox, point):
                a = dict(base, id=base["id"] + 100000 * k, area=area, bbox=bbox, point_coords=[point])
                a["segmentation"] = {"size": [H, W], "counts": coco_rle.string(runs)}
                d["annotations"].append(a)
            add(1, [0, W * H], W * H, [0, 0, W, H], [W / 2, H / 2])
            # column-major: pixel (x, y) at x * H + y
            add(2, [5 * H + 7, 1, W * H - 5 * H - 8], 1, [5, 7, 1, 1], [5.5, 7.5])
            p = 100 * H + 60
            add(3, [p, 3, H - 3, 3, H - 3, 3, W * H - p - 2 * H - 3], 9, [100, 60, 3, 3], [101.5, 61.5])
            data = json.dumps(d).encode()
            m.size = len(data)
        out.addfile(m, io.BytesIO(data))
PYEOF
run_ok "shard them, --keep-empty-masks" sa1b-shard -q --json-summary --image-size 64 --mask-size 16 \
    --keep-empty-masks -o keep.shard b.tar
grep_ok '"masks_empty":1[0-9]' .out "the added small masks are empty at R = 16 (and counted)"
run_ok "source-size masks" sa1b-shard -q --image-size 64 --mask-size source -o src.shard b.tar
for k in 1 2 4; do
    "$PY" - keep.shard src.shard "$k" <<'PYEOF' > check.tap
import sys
import numpy as np
import sa1b
K = int(sys.argv[3])
n = 0
def ok(c, d):
    global n
    n += 1
    print(("ok %d - %s" if c else "not ok %d - %s") % (n, d))
for path, kw in ((sys.argv[1], {}), (sys.argv[2], {"mask_size": 16})):
    seen = {"empty": 0, "full": 0, "valid": 0}
    bad = []
    for b in sa1b.Loader([path], batch=2, masks=16, points=K, seed=4, flip=0.5, **kw):
        S, R = b["image"].shape[1], b["masks"].shape[2]
        for i in range(b["count"]):
            w, h = [int(v) for v in b["content_size"][i]]
            wR, hR = max(1, (2 * w * R + S) // (2 * S)), max(1, (2 * h * R + S) // (2 * S))
            for m in range(b["n_masks"][i]):
                mk, lab, pts = b["masks"][i, m], b["labels"][i, m], b["points"][i, m]
                cells = int(mk.sum())
                if b["mask_id"][i, m] < 0:
                    bad.append("delivered mask without an id")
                if cells == 0:
                    seen["empty"] += 1
                    if b["valid"][i, m] != 0 or (lab != -1).any() or pts.any():
                        bad.append("empty mask %d: valid %d labels %s" % (b["mask_id"][i, m], b["valid"][i, m], lab))
                    continue
                seen["valid"] += 1
                if b["valid"][i, m] != 1 or lab[0] != 1:
                    bad.append("mask %d: valid %d labels %s" % (b["mask_id"][i, m], b["valid"][i, m], lab))
                    continue
                x, y = pts[0]
                cx, cy = int((x + 0.5) * R / S), int((y + 0.5) * R / S)
                if not (0 <= cx < R and 0 <= cy < R and mk[cy, cx]):
                    bad.append("mask %d: point 0 outside it" % b["mask_id"][i, m])
                full = cells == wR * hR
                seen["full"] += full
                for k in range(1, K, 2):
                    if full and (lab[k] != -1 or pts[k].any()):
                        bad.append("full mask %d: negative point %d not padding" % (b["mask_id"][i, m], k))
                    if not full and lab[k] != 0:
                        bad.append("mask %d: negative point %d label %d" % (b["mask_id"][i, m], k, lab[k]))
            for m in range(b["n_masks"][i], b["valid"].shape[1]):
                if b["valid"][i, m] != 0 or b["mask_id"][i, m] != -1:
                    bad.append("padding mask valid or with an id")
    name = "source-size masks at R=16" if kw else "--keep-empty-masks"
    ok(not bad, "%s, K=%d: masks empty at R are no valid pair, point 0 positive in every valid pair, "
       "full masks' negatives padding%s" % (name, K, (": " + "; ".join(bad[:3])) if bad else ""))
    ok(seen["empty"] >= 10 and seen["full"] >= 5 and seen["valid"] > 20,
       "%s, K=%d: seen %d empty, %d full, %d valid" % (name, K, seen["empty"], seen["full"], seen["valid"]))
print("1..%d" % n)
PYEOF
    for t in 1 2 3 4; do
        line=$(sed -n "${t}p" check.tap)
        case $line in "ok "*) ok 0 "${line#ok [0-9]* - }" ;; *) ok 1 "${line:-no output}" ;; esac
    done
done
done_testing
