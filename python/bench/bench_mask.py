"""bench_mask.py [ANNOTATIONS.json] - sa1b.mask against pycocotools.mask on
the real SA-1B masks (../shared/data/sa1b-real/sa_226381.json by default:
113 masks of 1500x2000): every function, and decoding to 256x256 straight
from the runs against pycocotools' full decode followed by a numpy
nearest resize (cv2 is not in Debian's Python by default; numpy's fancy
indexing is the same selection of pixels).  Median of REPEATS runs, ratio
pycocotools / sa1b in the same run (> 1: sa1b is faster)."""
import json
import os
import statistics
import sys
import time

import numpy as np

import sa1b.mask as S

try:
    import pycocotools.mask as P
except ImportError:
    print("bench_mask: no pycocotools in this environment (PyPI unreachable?): skipped")
    sys.exit(0)

REPEATS = int(os.environ.get("SA1B_BENCH_REPEATS", "5"))


def median_s(fn):
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(path):
    with open(path) as f:
        rles = [a["segmentation"] for a in json.load(f)["annotations"]]
    h, w = rles[0]["size"]
    chunk = 16  # masks decoded at once: 16 x 3 MB
    groups = [rles[i:i + chunk] for i in range(0, len(rles), chunk)]
    masks = [P.decode(g) for g in groups]
    brles = [{"size": r["size"], "counts": r["counts"].encode()} for r in rles]
    rh = rw = 256
    ys = ((2 * np.arange(rh) + 1) * h) // (2 * rh)
    xs = ((2 * np.arange(rw) + 1) * w) // (2 * rw)

    def coco_small():
        for g in groups:
            P.decode(g)[ys][:, xs]

    def sa1b_small():
        for g in groups:
            S.decode(g, size=(rh, rw))

    cases = [
        ("decode", lambda: [P.decode(g) for g in groups], lambda: [S.decode(g) for g in groups]),
        ("encode", lambda: [P.encode(m) for m in masks], lambda: [S.encode(m) for m in masks]),
        ("area", lambda: P.area(brles), lambda: S.area(brles)),
        ("toBbox", lambda: P.toBbox(brles), lambda: S.toBbox(brles)),
        ("iou 113x113", lambda: P.iou(brles, brles, [0] * len(brles)),
         lambda: S.iou(brles, brles, [0] * len(brles))),
        ("merge 113", lambda: P.merge(brles), lambda: S.merge(brles)),
        ("decode to 256x256", coco_small, sa1b_small),
    ]
    # the same answers, or the figures mean nothing
    assert all(np.array_equal(P.decode(g), S.decode(g)) for g in groups[:2])
    assert P.merge(brles) == S.merge(brles)
    print("sa1b.mask vs pycocotools.mask %s: %d masks of %dx%d, median of %d runs"
          % (getattr(P, "__version__", ""), len(rles), h, w, REPEATS))
    print("%-20s %14s %14s %8s" % ("function", "pycocotools ms", "sa1b ms", "ratio"))
    for name, ref, ours in cases:
        a, b = median_s(ref), median_s(ours)
        print("%-20s %14.3f %14.3f %7.2fx" % (name, a * 1e3, b * 1e3, a / b))


if __name__ == "__main__":
    default = next((p for p in (os.path.join(os.environ.get("top_srcdir", "."), "..", "shared"),
                                os.environ.get("SA1B_SHARED", "/nonexistent"))
                    if os.path.exists(os.path.join(p, "data", "sa1b-real", "sa_226381.json"))), "/nonexistent")
    default = os.path.join(default, "data", "sa1b-real", "sa_226381.json")
    path = sys.argv[1] if len(sys.argv) > 1 else default
    if not os.path.exists(path):
        print("bench_mask: no real SA-1B annotations at %s: skipped (../shared/data/sa1b-real beside the source tree, or $SA1B_SHARED/data/sa1b-real)" % path)
        sys.exit(0)
    main(path)
