#!/usr/bin/python3
"""shard_check.py - checks sa1b-shard output against an independent reference.

Written from the documents, not from the C code: the RLE decoder follows the
COCO string format, the resampling follows sa1b_rle.h, the selection follows
the SUBSAMPLING section of sa1b-shard(1).  Needs numpy.

  shard_check.py masks TAR INSPECT.jsonl R MODE
      every mask in the shard (sa1b-inspect --masks --rle output) equals the
      direct decode-and-resample of its source RLE; metadata matches.
  shard_check.py select TAR INSPECT.jsonl K STRATEGY SEED [MIN_AREA MIN_IOU MIN_STAB] [R=N [MODE]]
      the kept annotation ids of every image are exactly those the
      documented definition selects; with R=N the candidates are also only
      the masks that have a set cell at R = N (MODE area or nearest, default
      area), as sa1b-shard keeps them without --keep-empty-masks.
Prints TAP.
"""
import json
import math
import os
import sys
import tarfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coco_rle  # noqa: E402

M64 = (1 << 64) - 1


def rle_runs(s, h, w):
    rs = coco_rle.runs(s)
    assert sum(rs) == h * w, "run sum"
    return rs


decode = coco_rle.decode


def bbox_coco(m):
    ys, xs = np.nonzero(m)
    if len(xs) == 0:
        return [0.0, 0.0, 0.0, 0.0]
    return [float(xs.min()), float(ys.min()), float(xs.max() - xs.min() + 1), float(ys.max() - ys.min() + 1)]


def overlap_matrix(n, rn):
    """W[i, y] = |[y*rn, (y+1)*rn) & [i*n, (i+1)*n)|, exact integers."""
    wm = np.zeros((rn, n), dtype=np.int64)
    for i in range(rn):
        lo, hi = i * n, (i + 1) * n
        for y in range(lo // rn, min(n, (hi + rn - 1) // rn)):
            a, b = max(lo, y * rn), min(hi, (y + 1) * rn)
            if b > a:
                wm[i, y] = b - a
    return wm


def resample(m, rh, rw, mode):
    h, w = m.shape
    if mode == "nearest":
        ys = [(2 * i + 1) * h // (2 * rh) for i in range(rh)]
        xs = [(2 * j + 1) * w // (2 * rw) for j in range(rw)]
        return m[np.ix_(ys, xs)]
    cnt = overlap_matrix(h, rh) @ m.astype(np.int64) @ overlap_matrix(w, rw).T
    return (2 * cnt >= h * w).astype(np.uint8)


def fit(n, side, L):
    """round(n * side / L), halves up, at least 1."""
    return max(1, (2 * n * side + L) // (2 * L))


def read_tar(path):
    annos = {}
    with tarfile.open(path) as t:
        for m in t.getmembers():
            if m.name.endswith(".json"):
                d = json.load(t.extractfile(m))
                annos[d["image"]["image_id"]] = d
    return annos


def read_inspect(path):
    images, masks = [], {}
    for line in open(path):
        d = json.loads(line)
        if d.get("type") == "image":
            images.append(d)
        elif d.get("type") == "mask":
            masks.setdefault(d["image_id"], []).append(d)
    return images, masks


class Rng:
    """xoshiro256** seeded by splitmix64(seed ^ stream * 0xD1B54A32D192ED03)."""

    def __init__(self, seed, stream):
        x = (seed ^ (stream * 0xD1B54A32D192ED03)) & M64
        self.s = []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
            self.s.append(z ^ (z >> 31))

    def next(self):
        s = self.s
        rotl = lambda v, k: ((v << k) | (v >> (64 - k))) & M64
        r = (rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t
        s[3] = rotl(s[3], 45)
        return r

    def below(self, n):
        return (self.next() * n) >> 64

    def unit(self):
        return (self.next() >> 11) * 2.0 ** -53


def partial_shuffle(rng, v, t):
    for i in range(min(t, len(v))):
        j = i + rng.below(len(v) - i)
        v[i], v[j] = v[j], v[i]


def quality_key(c):
    return (-c["iou"], -c["stab"], c["i"])


def select(cands, k, strategy, seed, image_id, W, H):
    m = len(cands)
    if k == 0 or m <= k:
        return [c["i"] for c in cands]
    rng = Rng(seed, image_id & M64)
    if strategy == "random":
        v = list(cands)
        partial_shuffle(rng, v, k)
        return sorted(c["i"] for c in v[:k])
    if strategy == "quality":
        return sorted(c["i"] for c in sorted(cands, key=quality_key)[:k])
    if strategy == "size-balanced":
        la = [math.log(max(c["area"], 1)) for c in cands]
        lo, hi = min(la), max(la)
        bins = [0 if hi <= lo else min(7, math.floor(8 * (x - lo) / (hi - lo))) for x in la]
        chosen, out = set(), []
        for b in range(8):
            members = [p for p in range(m) if bins[p] == b]
            t = min(k // 8, len(members))
            partial_shuffle(rng, members, t)
            for p in members[:t]:
                chosen.add(p)
                out.append(cands[p]["i"])
        rest = [cands[p] for p in range(m) if p not in chosen]
        r = k - len(out)
        partial_shuffle(rng, rest, r)
        out += [c["i"] for c in rest[:r]]
        return sorted(out)
    # kmeans
    lwh, lmax = math.log(W * H), math.log(max(W, H))
    feats = []
    for c in cands:
        x, y, w, h = c["bbox"]
        feats.append([(x + w / 2) / W, (y + h / 2) / H, math.log(max(c["area"], 1)) / lwh,
                      0.5 + 0.5 * math.log(max(w, 1) / max(h, 1)) / lmax])
    d2f = lambda a, b: sum((a[f] - b[f]) * (a[f] - b[f]) for f in range(4))
    is_centre = [False] * m
    first = rng.below(m)
    is_centre[first] = True
    cent = [list(feats[first])]
    d2 = [d2f(f, cent[0]) for f in feats]
    for _ in range(1, k):
        total = 0.0
        for v in d2:
            total += v
        pick = m
        if total > 0:
            u, cum = rng.unit() * total, 0.0
            for i in range(m):
                cum += d2[i]
                if d2[i] > 0:
                    pick = i
                if cum > u and d2[i] > 0:
                    break
        else:
            pick = next(i for i in range(m) if not is_centre[i])
        is_centre[pick] = True
        cent.append(list(feats[pick]))
        d2 = [min(d2[i], d2f(feats[i], cent[-1])) for i in range(m)]

    def nearest(f):
        best, bd = 0, math.inf
        for ci, c in enumerate(cent):
            d = d2f(f, c)
            if d < bd:
                best, bd = ci, d
        return best

    assign = [nearest(f) for f in feats]
    for _ in range(25):
        sums = [[0.0] * 4 for _ in range(k)]
        counts = [0] * k
        for i in range(m):
            counts[assign[i]] += 1
            for f in range(4):
                sums[assign[i]][f] += feats[i][f]
        for ci in range(k):
            if counts[ci]:
                cent[ci] = [sums[ci][f] / counts[ci] for f in range(4)]
        new = [nearest(f) for f in feats]
        if new == assign:
            break
        assign = new
    best = {}
    for i in range(m):
        a = assign[i]
        if a not in best or quality_key(cands[i]) < quality_key(cands[best[a]]):
            best[a] = i
    kept = [best[a] for a in sorted(best)]
    out = [cands[i]["i"] for i in kept]
    if len(out) < k:
        rest = sorted((cands[i] for i in range(m) if i not in set(kept)), key=quality_key)
        out += [c["i"] for c in rest[:k - len(out)]]
    return sorted(out)


def main():
    r_arg = [i for i, a in enumerate(sys.argv) if a.startswith("R=")]
    empty_R, empty_mode = 0, "area"
    if r_arg:
        i = r_arg[0]
        empty_R = int(sys.argv[i][2:])
        if i + 1 < len(sys.argv):
            empty_mode = sys.argv[i + 1]
        del sys.argv[i:]
    mode = sys.argv[1]
    annos = read_tar(sys.argv[2])
    images, masks = read_inspect(sys.argv[3])
    n = 0
    fails = 0

    def ok(cond, desc):
        nonlocal n, fails
        n += 1
        print(("ok %d - %s" if cond else "not ok %d - %s") % (n, desc))
        fails += 0 if cond else 1

    if mode == "masks":
        R, rmode = int(sys.argv[4]), sys.argv[5]
        checked = 0
        for img in images:
            d = annos[img["image_id"]]
            W, H = d["image"]["width"], d["image"]["height"]
            L = max(W, H)
            rw, rh = fit(W, R, L), fit(H, R, L)
            by_id = {a["id"]: a for a in d["annotations"]}
            bad = []
            for mk in masks.get(img["image_id"], []):
                a = by_id[mk["id"]]
                full = decode(a["segmentation"]["counts"], H, W)
                want = np.zeros((R, R), dtype=np.uint8)
                want[:rh, :rw] = resample(full, rh, rw, rmode)
                rl = mk["mask_rle"]
                got = decode(rl["counts"], rl["size"][0], rl["size"][1])
                scale = img["scale"]
                area = float(full.sum())
                meta_ok = (abs(mk["area"] - area * scale * scale) <= 1e-3 * max(1.0, area * scale * scale)
                           and all(abs(g - b * scale) <= 1e-3 * max(1.0, b * scale)
                                   for g, b in zip(mk["bbox"], bbox_coco(full)))
                           and mk["orig_area"] == a["area"]
                           and all(abs(g - b) <= 1e-3 for g, b in zip(mk["orig_bbox"], a["bbox"]))
                           and abs(mk["predicted_iou"] - a["predicted_iou"]) < 1e-6
                           and abs(mk["stability_score"] - a["stability_score"]) < 1e-6
                           and all(abs(g - p * scale) <= 1e-3 * max(1.0, p * scale)
                                   for g, p in zip(mk["point_coords"][0], a["point_coords"][0])))
                if not np.array_equal(got, want) or not meta_ok:
                    bad.append(mk["id"])
                checked += 1
            ok(not bad, "image %d: %d masks equal decode-and-resample, metadata matches%s" % (
                img["image_id"], len(masks.get(img["image_id"], [])), (" (bad: %s)" % bad[:5]) if bad else ""))
        ok(checked > 0, "checked %d masks" % checked)
    else:
        k, strategy, seed = int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
        min_area = int(sys.argv[7]) if len(sys.argv) > 7 else 0
        min_iou = float(sys.argv[8]) if len(sys.argv) > 8 else -math.inf
        min_stab = float(sys.argv[9]) if len(sys.argv) > 9 else -math.inf
        for img in images:
            d = annos[img["image_id"]]
            W, H = d["image"]["width"], d["image"]["height"]
            cands = []
            for i, a in enumerate(d["annotations"]):
                full = decode(a["segmentation"]["counts"], H, W)
                c = {"i": i, "area": int(full.sum()), "bbox": bbox_coco(full),
                     "iou": a["predicted_iou"], "stab": a["stability_score"]}
                if c["area"] >= min_area and c["iou"] >= min_iou and c["stab"] >= min_stab:
                    if empty_R:
                        L = max(W, H)
                        if not resample(full, fit(H, empty_R, L), fit(W, empty_R, L), empty_mode).any():
                            continue  # no set cell at R: not a candidate
                    cands.append(c)
            want = [d["annotations"][i]["id"] for i in select(cands, k, strategy, seed, img["image_id"], W, H)]
            got = [mk["id"] for mk in masks.get(img["image_id"], [])]
            ok(got == want, "image %d: %s k=%d keeps the documented %d masks" % (
                img["image_id"], strategy, k, len(want)))
    print("1..%d" % n)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
