"""test_torch_cuda.py SHARD... - sa1b.torch's pinned-memory batches on a
CUDA device: every tensor of to_torch(batch, pin_memory=True) and of
ShardDataset(pin_memory=True) is page-locked and holds the batch's values;
.cuda(non_blocking=True) of each, on a side stream, reaches the device
intact; DataLoader's own pin_memory=True pins the views.  Skips (77)
without a CUDA device."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

try:
    import torch
    import torch.utils.data
except ImportError:
    tap.skip_all("no torch (Debian: python3-torch)")
if not torch.cuda.is_available():
    tap.skip_all("no CUDA device for torch")
import numpy as np  # noqa: E402
import sa1b  # noqa: E402
from sa1b.torch import ShardDataset, to_torch  # noqa: E402

PATHS = sys.argv[1:]
ALL = sorted(i for p in PATHS for s in [sa1b.Shard(p)] for i in (s.meta(k)["image_id"] for k in range(len(s))))
KEYS = ("image", "masks", "points", "labels", "valid", "image_id")


def same(t, ref):
    return t.shape == tuple(ref.shape) and np.array_equal(t.numpy(), ref)


# to_torch with pin_memory: copies in page-locked memory, equal to the batch
loader = sa1b.Loader(PATHS, batch=3, masks=2, points=2, seed=5, threads=2)
n = 0
stream = torch.cuda.Stream()
for b in loader:
    ref = {k: np.array(b[k]) for k in KEYS}
    t = to_torch(b, pin_memory=True)
    tap.ok(all(t[k].is_pinned() for k in KEYS), "batch %d: every tensor pinned" % n,
           [(k, t[k].is_pinned()) for k in KEYS])
    tap.ok(all(same(t[k], ref[k]) for k in KEYS), "batch %d: pinned copies hold the batch's values" % n)
    with torch.cuda.stream(stream):
        dev = {k: t[k].cuda(non_blocking=True) for k in KEYS}
    stream.synchronize()
    tap.ok(all(dev[k].is_cuda and same(dev[k].cpu(), ref[k]) for k in KEYS),
           "batch %d: .cuda(non_blocking=True) on a side stream arrives intact" % n)
    n += 1
tap.ok(n > 0, "the loader gave %d batches" % n)

# the dataset's pin_memory, and DataLoader's own pin_memory over views
for label, ds_pin, dl_pin in (("ShardDataset(pin_memory=True)", True, False),
                              ("DataLoader(pin_memory=True)", False, True)):
    ds = ShardDataset(PATHS, batch=2, masks=2, points=1, seed=3, threads=1, pin_memory=ds_pin)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0, pin_memory=dl_pin)
    pinned, total, ids = 0, 0, []
    for b in dl:
        total += 1
        pinned += all(b[k].is_pinned() for k in KEYS)
        d = b["image"].cuda(non_blocking=True)
        torch.cuda.synchronize()
        tap.ok(torch.equal(d.cpu(), b["image"]), "%s batch %d: the image on the device equals the batch" % (label, total))
        ids += b["image_id"][b["image_id"] >= 0].tolist()
    tap.eq(pinned, total, "%s: %d of %d batches pinned" % (label, pinned, total))
    tap.eq(sorted(ids), ALL, "%s: every image exactly once" % label)
tap.done()
