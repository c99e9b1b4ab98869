"""bench_loader.py [IMAGES] - images/s into a PyTorch loop: sa1b.torch over
shards against what users run today, webdataset over the same tars with
PIL decoding, pycocotools mask decoding and a torch DataLoader with 2
worker processes; at S = 1024 and 256 (masks at S/4, 16 masks and one
point per image, batches of 8), one epoch a run, median of 3 runs each,
interleaved.  The tars are SA-1B shaped (2250x1500 JPEGs, ~100 masks
each): sa1b-synth's annotations with the JPEGs replaced by the large
photographs of Debian's wallpaper packages (/usr/share/backgrounds;
synthetic images when there are none, said in the output), split into 4
tars so that both DataLoader workers have work.  The time sa1b-shard takes
to make the shards is shown beside.  Needs sa1b-synth and sa1b-shard in
PATH, torch, PIL, pycocotools; webdataset is used when installed (else the
same per-sample work over tarfile, said in the output)."""
import glob
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np

try:
    import torch
    import torch.utils.data
    from PIL import Image
    import pycocotools.mask as coco_mask
except ImportError as e:
    print("bench_loader: %s: skipped" % e)
    sys.exit(0)
try:
    import webdataset as wds
except ImportError:
    wds = None

from sa1b.torch import ShardDataset

B, M, K, TARS, WORKERS = 8, 16, 1, 4, 2


def photos():
    out = []
    for p in sorted(glob.glob("/usr/share/backgrounds/*.jpg")):
        try:
            im = Image.open(p).convert("RGB")
        except OSError:
            continue
        w, h = im.size
        if w < 1500 or h < 1000:
            continue
        # 3:2 centre crop, then SA-1B's 2250x1500
        cw = min(w, h * 3 // 2)
        ch = cw * 2 // 3
        im = im.crop(((w - cw) // 2, (h - ch) // 2, (w + cw) // 2, (h + ch) // 2)).resize((2250, 1500))
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def make_tars(tmp, n):
    synth = os.path.join(tmp, "synth.tar")
    subprocess.run(["sa1b-synth", "--quiet", "-n", str(n), "-W", "2250", "-H", "1500", "-m", "100",
                    "-s", "7", "-o", synth], check=True)
    pics = photos()
    members = []
    with tarfile.open(synth) as t:
        for m in t.getmembers():
            members.append((m.name, t.extractfile(m).read()))
    paths = [os.path.join(tmp, "sa_%06d.tar" % i) for i in range(TARS)]
    keys = sorted({name.rsplit(".", 1)[0] for name, _ in members})
    per = (len(keys) + TARS - 1) // TARS
    data = dict(members)
    for i, path in enumerate(paths):
        with tarfile.open(path, "w") as out:
            for j, key in enumerate(keys[i * per:(i + 1) * per]):
                for ext in ("jpg", "json"):
                    body = data[key + "." + ext]
                    if ext == "jpg" and pics:
                        body = pics[(i * per + j) % len(pics)]
                    info = tarfile.TarInfo(key + "." + ext)
                    info.size = len(body)
                    out.addfile(info, io.BytesIO(body))
    return paths, len(pics)


def letterbox(im, S):
    w, h = im.size
    s = S / max(w, h)
    nw, nh = max(1, round(w * s)), max(1, round(h * s))
    canvas = np.zeros((S, S, 3), np.uint8)
    canvas[:nh, :nw] = np.asarray(im.resize((nw, nh), Image.BILINEAR))
    return canvas


def baseline_sample(jpg, js, S, rng):
    """what a PyTorch user's SA-1B dataset does per sample today"""
    R = S // 4
    im = Image.open(io.BytesIO(jpg)).convert("RGB")
    image = letterbox(im, S)
    anns = json.loads(js)["annotations"]
    pick = rng.sample(range(len(anns)), min(M, len(anns)))
    masks = np.zeros((M, R, R), np.uint8)
    points = np.zeros((M, K, 2), np.float32)
    for k, a in enumerate(pick):
        full = coco_mask.decode(anns[a]["segmentation"])
        h, w = full.shape
        s = R / max(h, w)
        nw, nh = max(1, round(w * s)), max(1, round(h * s))
        # nearest resize by indexing (cv2 is not in Debian's Python; PIL would
        # first copy the Fortran-order mask)
        ys = ((2 * np.arange(nh) + 1) * h) // (2 * nh)
        xs = ((2 * np.arange(nw) + 1) * w) // (2 * nw)
        masks[k, :nh, :nw] = full[ys][:, xs]
        ys, xs = np.nonzero(masks[k])
        if len(ys):
            i = rng.randrange(len(ys))
            points[k, 0] = (xs[i] * S / R, ys[i] * S / R)
    return torch.from_numpy(image), torch.from_numpy(masks), torch.from_numpy(points)


class TarDataset(torch.utils.data.IterableDataset):
    """the same per-sample work over tarfile, when webdataset is missing"""

    def __init__(self, paths, S):
        self.paths, self.S = paths, S

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        mine = self.paths[info.id::info.num_workers] if info else self.paths
        rng = random.Random(0)
        for p in mine:
            with tarfile.open(p) as t:
                pending = {}
                for m in t.getmembers():
                    key, ext = m.name.rsplit(".", 1)
                    pending.setdefault(key, {})[ext] = t.extractfile(m).read()
                    if len(pending[key]) == 2:
                        d = pending.pop(key)
                        yield baseline_sample(d["jpg"], d["json"], self.S, rng)


def baseline_loader(paths, S):
    if wds is not None:
        rng = random.Random(0)
        ds = wds.WebDataset(paths, shardshuffle=False).map(
            lambda d: baseline_sample(d["jpg"], d["json"], S, rng))
    else:
        ds = TarDataset(paths, S)
    return torch.utils.data.DataLoader(ds, batch_size=B, num_workers=WORKERS)


def epoch_rate(make):
    t0 = time.perf_counter()
    n = 0
    for b in make():
        image = b["image"] if isinstance(b, dict) else b[0]
        valid = b["image_id"] >= 0 if isinstance(b, dict) else None
        n += int(valid.sum()) if valid is not None else image.shape[0]
    return n / (time.perf_counter() - t0), n


def main(n):
    tmp = tempfile.mkdtemp(prefix="bench-loader-")
    try:
        paths, n_pics = make_tars(tmp, n)
        print("bench_loader: %d images of 2250x1500 in %d tars (%s), ~100 masks each; "
              "%d masks and %d point per image, batches of %d, 2 cores; baseline: %s + PIL + "
              "pycocotools, DataLoader with %d workers; median of 3 epochs"
              % (n, TARS, "%d Debian wallpaper photographs" % n_pics if n_pics else
                 "synthetic images: no photographs in /usr/share/backgrounds", M, K, B,
                 "webdataset %s" % wds.__version__ if wds else "tarfile (no webdataset)", WORKERS))
        print("load average before: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
        print("%-6s %12s %12s %10s %14s" % ("S", "sa1b img/s", "base img/s", "ratio", "shard-making s"))
        for S in (1024, 256):
            out = os.path.join(tmp, "shards%d" % S)
            t0 = time.perf_counter()
            subprocess.run(["sa1b-shard", "-q", "-j", "2", "--image-size", str(S), "--max-masks", "64",
                            "-o", out] + paths, check=True)
            shard_s = time.perf_counter() - t0
            shards = sorted(glob.glob(os.path.join(out, "*.shard")))
            ours = lambda: torch.utils.data.DataLoader(  # noqa: E731
                ShardDataset(shards, batch=B, masks=M, points=K, seed=0, threads=2),
                batch_size=None, num_workers=0)
            base = lambda: baseline_loader(paths, S)  # noqa: E731
            a, b = [], []
            for _ in range(3):
                ra, na = epoch_rate(ours)
                rb, nb = epoch_rate(base)
                assert na == nb == n, (na, nb, n)
                a.append(ra)
                b.append(rb)
            ma, mb = statistics.median(a), statistics.median(b)
            print("%-6d %12.1f %12.1f %9.1fx %14.2f" % (S, ma, mb, ma / mb, shard_s))
    finally:
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 64)
