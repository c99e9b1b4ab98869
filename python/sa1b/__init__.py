"""sa1b: the SA-1B toolkit's library from Python.

    import sa1b.mask as mask_util        # a drop-in for pycocotools.mask
    shard = sa1b.Shard("x.shard")        # a shard as numpy views
    sa1b.verify("x.shard")               # what sa1b-verify checks

A thin CPython extension over libsa1b; numpy is its only dependency.
"""
from sa1b._sa1b import Loader, Shard, verify, version

__all__ = ["Loader", "Shard", "verify", "version", "mask"]
__version__ = version()
