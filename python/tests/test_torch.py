"""test_torch.py SHARD... - sa1b.torch.ShardDataset: with 2 DataLoader
workers on each of 2 ranks, and without workers, every image exactly once
per epoch and the same number of batches everywhere; tensors are views of
the loader's batch (no copy) in the main process; set_epoch changes the
order."""
import collections
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

try:
    import torch
    import torch.utils.data
except ImportError:
    tap.skip_all("no torch (Debian: python3-torch)")
import numpy as np  # noqa: E402
import sa1b  # noqa: E402
from sa1b.torch import ShardDataset, to_torch  # noqa: E402

PATHS = sys.argv[1:]
ALL = sorted(i for p in PATHS for s in [sa1b.Shard(p)] for i in (s.meta(k)["image_id"] for k in range(len(s))))


def run(workers, world, epoch=0):
    """ids per (rank) and batch counts per (rank, worker stream)"""
    ids, counts = [], collections.Counter()
    for rank in range(world):
        ds = ShardDataset(PATHS, batch=2, masks=2, points=1, seed=3, rank=rank, world=world, threads=1)
        ds.set_epoch(epoch)
        dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)
        for b in dl:
            if not (isinstance(b["image"], torch.Tensor) and b["image"].dtype == torch.uint8):
                raise AssertionError("not a uint8 tensor: %r" % type(b["image"]))
            got = b["image_id"][b["image_id"] >= 0].tolist()
            ids += got
            counts[rank] += 1
    return ids, counts


for workers, world in [(0, 1), (2, 1), (0, 2), (2, 2)]:
    ids, counts = run(workers, world)
    tap.eq(sorted(ids), ALL, "%d workers, %d ranks: every image exactly once" % (workers, world))
    tap.eq(len(set(counts.values())), 1, "%d workers, %d ranks: every rank the same number of batches" % (workers, world))
# Under AddressSanitizer (py-lib.sh preloads it) a DataLoader worker forked
# from a rank whose gloo threads are running can inherit the sanitizer's
# allocator lock held and wait on it for ever (GCC 12's libasan takes no
# lock around fork; glibc's malloc does): the ranks there read without
# workers, which the cases above cover.
DDP_WORKERS = 0 if "libasan" in os.environ.get("LD_PRELOAD", "") else 2


def ddp_rank(rank, world, init, out):
    """one DDP process: rank and world from torch.distributed, 2 workers"""
    torch.distributed.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    ds = ShardDataset(PATHS, batch=2, masks=1, points=1, seed=3, threads=1)
    ids = []
    for b in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=DDP_WORKERS):
        ids += b["image_id"][b["image_id"] >= 0].tolist()
    with open("%s.%d" % (out, rank), "w") as f:
        f.write(" ".join(map(str, ids)))
    torch.distributed.destroy_process_group()


if torch.distributed.is_available():
    import tempfile
    import torch.multiprocessing as mp
    tmp = tempfile.mkdtemp()
    # fork: spawn would re-run this script (it has no main guard)
    mp.start_processes(ddp_rank, args=(2, "file://" + os.path.join(tmp, "init"), os.path.join(tmp, "ids")),
                       nprocs=2, start_method="fork")
    got = []
    for r in range(2):
        with open(os.path.join(tmp, "ids.%d" % r)) as f:
            got += [int(v) for v in f.read().split()]
    tap.eq(sorted(got), ALL, "torch.distributed (gloo, 2 processes) x %d workers: rank and world taken from it, "
           "every image exactly once" % DDP_WORKERS)
else:
    tap.skip(1, "torch.distributed is not available")
e0, _ = run(2, 2, epoch=0)
e1, _ = run(2, 2, epoch=1)
tap.ok(sorted(e0) == sorted(e1) and e0 != e1, "set_epoch(1): the same images in another order")
# persistent workers keep the dataset they started with: set_epoch reaches
# them all the same (before: every epoch was epoch 0's order and flips)
ds = ShardDataset(PATHS, batch=2, masks=1, points=1, seed=3, threads=1, flip=0.5)
dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True)
fresh = torch.utils.data.DataLoader(ShardDataset(PATHS, batch=2, masks=1, points=1, seed=3, threads=1, flip=0.5),
                                    batch_size=None, num_workers=2)
got, want = [], []
for epoch in range(3):
    ds.set_epoch(epoch)
    fresh.dataset.set_epoch(epoch)
    got.append([(b["image_id"].tolist(), b["flipped"].tolist(), b["epoch"]) for b in dl])
    want.append([(b["image_id"].tolist(), b["flipped"].tolist(), b["epoch"]) for b in fresh])
tap.ok(got == want and got[0] != got[1] != got[2], "persistent_workers=True: set_epoch gives each epoch's "
       "order and flips, as fresh workers do", diag="%r\n%r" % (got, want))
del dl
tap.raises(ValueError, lambda: ds.set_epoch(-1), "set_epoch(-1)", match="epoch")

L = sa1b.Loader(PATHS, batch=2, masks=2, threads=1)
b = next(L)
t = to_torch(b)
tap.ok(t["image"].data_ptr() == b["image"].__array_interface__["data"][0], "to_torch: a view, no copy")
del b
tap.eq(L.held, 1, "the tensor keeps the batch")
t["masks"] = t["image"] = None
t = None
tap.eq(L.held, 0, "and gives it back when it dies")
# one path as a str, a pathlib.Path or bytes: one shard, as sa1b.Loader takes it (before: a Path or bytes
# was iterated as a list of paths: TypeError)
import pathlib  # noqa: E402
for one in (PATHS[0], pathlib.Path(PATHS[0]), os.fsencode(PATHS[0])):
    tap.eq(ShardDataset(one, batch=1, threads=1).paths, [one], "ShardDataset(%s): one shard" % type(one).__name__)
first = next(iter(torch.utils.data.DataLoader(ShardDataset(PATHS, batch=2, threads=1), batch_size=None)))
tap.ok(set(first) >= {"image", "image_id", "labels", "masks", "points", "valid"},
       "a batch has image, masks, points, labels, valid, image_id", sorted(first))
tap.eq((tuple(first["image"].shape), first["points"].dtype, first["labels"].dtype, first["image_id"].dtype),
       ((2, 32, 32, 3), torch.float32, torch.int32, torch.int64), "shapes and dtypes")
# pinned memory on a CUDA device: test_torch_cuda.py (t1886)

# the README's training loop (python/examples/train_torch.py) runs and learns nothing absurd
example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "train_torch.py")
run = subprocess.run([sys.executable, example, *PATHS, "--steps", "10", "--batch", "4"],
                     capture_output=True, text=True)
losses = [float(line.split()[-1]) for line in run.stdout.splitlines() if " loss " in line]
tap.ok(run.returncode == 0 and len(losses) == 1 and 0 < losses[0] < 10,
       "examples/train_torch.py trains 10 steps", run.stdout + run.stderr[-2000:])
tap.done()
