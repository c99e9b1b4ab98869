#!/usr/bin/python3
"""shard_baseline.py - what users do today, the baseline of bench-shard.sh:
tarfile, PIL decode and resize, per-mask full-resolution RLE decode with numpy
in the pycocotools algorithm, numpy resize, np.memmap write.
Usage: shard_baseline.py TAR OUT S MAX_MASKS; prints images/s."""
import io
import json
import os
import random
import sys
import tarfile
import time

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import coco_rle  # noqa: E402


rle_decode = coco_rle.decode


def main():
    tar, out, S, K = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    R = S // 4
    t0 = time.time()
    members = {}
    rows = []
    with tarfile.open(tar) as t:
        for m in t:
            stem, ext = m.name.rsplit(".", 1)
            members.setdefault(stem, {})[ext] = t.extractfile(m).read()
            pair = members[stem]
            if "jpg" not in pair or "json" not in pair:
                continue
            del members[stem]
            d = json.loads(pair["json"])
            img = Image.open(io.BytesIO(pair["jpg"])).convert("RGB")
            W, H = img.size
            sc = S / max(W, H)
            nw, nh = max(1, round(W * sc)), max(1, round(H * sc))
            canvas = np.zeros((S, S, 3), np.uint8)
            canvas[:nh, :nw] = np.asarray(img.resize((nw, nh), Image.BOX))
            anns = d["annotations"]
            random.Random(0).shuffle(anns)
            masks = np.zeros((K, R, R), np.uint8)
            mw, mh = max(1, round(W * R / max(W, H))), max(1, round(H * R / max(W, H)))
            ys = (np.arange(mh) * H) // mh
            xs = (np.arange(mw) * W) // mw
            for j, a in enumerate(anns[:K]):
                full = rle_decode(a["segmentation"]["counts"], H, W)
                masks[j, :mh, :mw] = full[np.ix_(ys, xs)]
            rows.append((canvas, masks))
    mm = np.memmap(out, dtype=np.uint8, mode="w+", shape=(len(rows), S * S * 3 + K * R * R))
    for i, (c, m) in enumerate(rows):
        mm[i, :S * S * 3] = c.reshape(-1)
        mm[i, S * S * 3:] = m.reshape(-1)
    mm.flush()
    print("%.3f" % (len(rows) / (time.time() - t0)))


main()
