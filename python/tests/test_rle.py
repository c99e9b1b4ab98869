"""test_rle.py PACKED RLE SOURCE R - version-2 shards from Python: the
packed (version 1), run-length and source-size shards of the same input
give the same masks through sa1b.Shard (the source-size one at size=R) and
the same batches through sa1b.Loader (the source-size one with mask_size=R);
what a version-2 shard cannot give (packed bits, masks of no size) is a
ValueError that says why, never a crash."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402
import sa1b  # noqa: E402

packed, rle, source, R = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
p, r, s = sa1b.Shard(packed), sa1b.Shard(rle), sa1b.Shard(source)
tap.ok(p.version == 1 and r.version == 2 and s.version == 2 and s.mask_size == 0,
       "versions 1, 2, 2; the source-size shard has no mask size")
same = all(np.array_equal(p.masks(i), r.masks(i)) for i in range(len(p)))
tap.ok(same and len(p) == len(r), "run-length masks equal the packed ones, image by image (%d images)" % len(p))
same = all(np.array_equal(p.masks(i), s.masks(i, size=R)) for i in range(len(p)))
tap.ok(same, "source-size masks at size=%d equal the packed shard's (area)" % R)
a = s.masks(0, size=2 * R, resample="nearest")
tap.ok(a.shape[1:] == (2 * R, 2 * R) and a.max() == 1 and np.array_equal(a, s.masks(0, size=2 * R, resample="nearest")),
       "a source-size shard at any size (%d, nearest)" % (2 * R))


def raises(f, what):
    try:
        f()
    except ValueError as e:
        tap.ok(True, "%s: ValueError (%s)" % (what, e))
        return
    tap.ok(False, "%s: no ValueError" % what)


raises(lambda: r.masks(0, packed=True), "packed bits of a run-length shard")
raises(lambda: s.masks(0), "masks of a source-size shard without a size")
raises(lambda: p.masks(0, size=2 * R), "a fixed-size shard's masks at another size")
raises(lambda: s.masks(0, size=8, resample="bilinear"), "an unknown resampling")
raises(lambda: sa1b.Loader([source], batch=2, masks=4, points=1), "a loader over source-size masks without mask_size")
raises(lambda: s.masks(0, size=0), "size=0 (not the default: 1..4096)")
raises(lambda: s.masks(0, size=-1), "size=-1")
raises(lambda: sa1b.Loader([source], batch=2, masks=4, points=1, mask_size=0), "mask_size=0 (1..4096, or None)")


def first_batch(path, **kw):
    loader = sa1b.Loader([path], batch=2, masks=4, points=1, seed=3, threads=1, **kw)
    b = next(iter(loader))
    out = {k: np.array(v) for k, v in b.items()}
    del b
    loader.close()
    return out


bp, br, bs = first_batch(packed), first_batch(rle), first_batch(source, mask_size=R)
tap.ok(all(np.array_equal(bp[k], br[k]) and np.array_equal(bp[k], bs[k]) for k in bp),
       "the loader's first batch is the same from the three shards (%s)" % ", ".join(sorted(bp)))
for path in (packed, rle, source):
    sa1b.verify(path)
tap.ok(True, "sa1b.verify passes the three")
tap.done()
