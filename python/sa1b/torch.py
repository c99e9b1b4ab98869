"""sa1b.torch: sa1b.Loader batches as PyTorch tensors, and an IterableDataset
that divides the stream among DataLoader workers and DDP ranks.

    from sa1b.torch import ShardDataset
    ds = ShardDataset(paths, batch=8, masks=16, points=1, seed=0, flip=0.5)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    for epoch in range(E):
        ds.set_epoch(epoch)
        for b in dl:  # dict of tensors, image [B, S, S, 3] uint8, masks [B, M, R, R], ...
            ...

Splitting.  Worker w of W DataLoader workers on rank r of R DDP ranks runs
the C loader as rank r*W + w of R*W: each takes its contiguous slice of
every global batch of B*R*W images, so every image is visited exactly
once per epoch over all ranks and workers, and every one of them yields
the same number of batches (a slice of the short last global batch may be
short or empty: its padding rows have image_id -1 and valid 0).  rank and
world default to torch.distributed's when it is initialised.

Workers.  The loader already decodes, picks masks and points and flips in
its own threads (threads=), with the GIL released: num_workers=0 is the
fast configuration, and its tensors are views of the loader's buffers (no
copy).  DataLoader worker processes work too, but each batch is then
copied into shared memory to reach the main process; use them only when
the rest of a per-sample pipeline in Python needs processes.

Epochs.  set_epoch(e) reaches DataLoader worker processes that live across
epochs (persistent_workers=True) too: the epoch is kept in shared memory.

Pinned memory.  pin_memory=True (or DataLoader's own pin_memory=True)
copies each batch into page-locked memory, so that .cuda(non_blocking=True)
overlaps the copy with compute.
"""
import operator

import numpy as np
import torch
import torch.utils.data

import sa1b

__all__ = ["to_torch", "ShardDataset"]


def to_torch(batch, pin_memory=False):
    """A Loader batch as a dict of tensors: torch.from_numpy views (no copy;
    each keeps the batch alive), or page-locked copies with pin_memory.
    shard and shard_index (unsigned, which torch lacks) become int64
    copies of B values."""
    out = {}
    for k, v in batch.items():
        if hasattr(v, "__array_interface__"):
            if v.dtype.kind == "u" and v.dtype.itemsize > 1:
                v = v.astype(np.int64)
            t = torch.from_numpy(v)
            out[k] = t.pin_memory() if pin_memory else t
        else:
            out[k] = v
    return out


def _dist_rank_world():
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class ShardDataset(torch.utils.data.IterableDataset):
    """Batches of shards for DataLoader(ds, batch_size=None): each item is one
    batch (to_torch of a sa1b.Loader batch).  Arguments as sa1b.Loader's
    (batch, masks, points, seed, flip, threads, ...; epochs=1 per
    iteration); rank/world: None takes torch.distributed's."""

    def __init__(self, paths, batch=1, masks=1, points=1, seed=0, epoch=0, rank=None, world=None,
                 pin_memory=False, **loader_args):
        super().__init__()
        one = isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__")  # a path, not a list of them
        self.paths = [paths] if one else list(paths)
        self.batch, self.masks, self.points, self.seed = batch, masks, points, seed
        # in shared memory: persistent DataLoader workers keep the copy of the
        # dataset they started with, and set_epoch must reach them (before:
        # every epoch of theirs was the first one's order, masks and flips)
        self._epoch = torch.zeros(1, dtype=torch.int64).share_memory_()
        self.epoch = epoch
        self.rank, self.world = rank, world
        self.pin_memory = pin_memory
        self.loader_args = loader_args

    @property
    def epoch(self):
        """The epoch of the next iteration (0..2^64-1)."""
        return int(self._epoch[0]) & (2 ** 64 - 1)

    @epoch.setter
    def epoch(self, epoch):
        try:
            e = operator.index(epoch)
        except TypeError:
            e = -1
        if not 0 <= e < 2 ** 64:
            raise ValueError("Loader: epoch must be a non-negative integer")
        self._epoch[0] = e - 2 ** 64 if e >= 2 ** 63 else e  # uint64 in the int64

    def set_epoch(self, epoch):
        """The epoch of the next iteration (its order, masks, points, flips),
        in this process and in DataLoader's worker processes."""
        self.epoch = epoch

    def split(self):
        """(rank, world) this process and worker run the loader as."""
        rank, world = _dist_rank_world()
        if self.rank is not None:
            rank = self.rank
        if self.world is not None:
            world = self.world
        info = torch.utils.data.get_worker_info()
        if info is None:
            return rank, world
        return rank * info.num_workers + info.id, world * info.num_workers

    def __iter__(self):
        rank, world = self.split()
        loader = sa1b.Loader(self.paths, batch=self.batch, masks=self.masks, points=self.points,
                             seed=self.seed, epoch=self.epoch, rank=rank, world=world,
                             **self.loader_args)
        for b in loader:
            yield to_torch(b, self.pin_memory)
