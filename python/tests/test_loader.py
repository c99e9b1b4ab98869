"""test_loader.py SHARD... -- DAMAGED -- JPEG... - sa1b.Loader against sa1b-loadbench --print-ids
(the same order for several configurations) and against sa1b.Shard (the
same images and masks, mirrored when flipped; points inside or outside
their mask as labelled); zero-copy views whose base returns the batch;
determinism over thread counts; errors, and with verify=True the damaged
shard DAMAGED (one image's payload flipped) reported by name and skipped
on the next call; JPEG shards (the same tars) decoded in the workers: the
same order as sa1b-loadbench, and each image the shard's JPEG as PIL
decodes it inside the content, zeros outside; a manifest as the one
path.  The built programs are in PATH."""
import gc
import io
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402
import sa1b  # noqa: E402

ARGS = " ".join(sys.argv[1:]).split(" -- ")
PATHS = ARGS[0].split()
DAMAGED = ARGS[1] if len(ARGS) > 1 else None
JPEG = ARGS[2].split() if len(ARGS) > 2 else []


def loadbench_ids(args, paths=None):
    out = subprocess.run(["sa1b-loadbench", "-q", "--print-ids", *args, *(paths or PATHS)],
                         check=True, capture_output=True, text=True)
    return out.stdout.splitlines()


def python_ids(paths=None, **kw):
    lines = []
    for b in sa1b.Loader(paths or PATHS, **kw):
        ids = b["image_id"][:b["count"]].tolist()
        lines.append(" ".join(str(v) for v in [b["epoch"], b["step"]] + ids))
    return lines


def check_order():
    configs = [
        (["-b", "4", "-e", "2", "-s", "9"], dict(batch=4, epochs=2, seed=9)),
        (["-b", "3", "-s", "1", "--rank", "1", "--world", "2"], dict(batch=3, seed=1, rank=1, world=2)),
        (["-b", "3", "-s", "1", "--rank", "0", "--world", "2"], dict(batch=3, seed=1, rank=0, world=2)),
        (["-b", "5", "-s", "4", "--resume", "1:10"], dict(batch=5, seed=4, epoch=1, consumed=10)),
        (["-b", "4", "-s", "2", "--drop-last", "-e", "3"], dict(batch=4, seed=2, drop_last=True, epochs=3)),
        (["-b", "2", "-s", "7", "--flip", "0.5", "-k", "3", "-m", "2"],
         dict(batch=2, seed=7, flip=0.5, points=3, masks=2)),
    ]
    for args, kw in configs:
        tap.eq(python_ids(**kw), loadbench_ids(args), "order as sa1b-loadbench %s" % " ".join(args))


def check_resume():
    """Loader(epoch=b["epoch"], consumed=b["next_position"]) resumes after any
    batch b, the last of an epoch included (its next_position is the epoch's
    image count; before, that was refused)"""
    kw = dict(batch=3, seed=5, epochs=2)
    whole = python_ids(**kw)
    stream = []
    for b in sa1b.Loader(PATHS, **kw):
        stream.append((int(b["epoch"]), int(b["next_position"])))
    ok = True
    for i, (e, pos) in enumerate(stream):
        rest = python_ids(batch=3, seed=5, epoch=e, consumed=pos, epochs=2 - e)
        ok &= rest == whole[i + 1:]
    tap.ok(ok and len(stream) > 2, "resume after each of %d batches (epoch ends included) gives the rest" % len(stream))


def mirror(a, w):
    """a [.., W] with its first w columns mirrored"""
    out = a.copy()
    out[..., :w] = a[..., :w][..., ::-1]
    return out


def check_content():
    shards = [sa1b.Shard(p) for p in PATHS]
    tables = [s.mask_table() for s in shards]
    S, R = shards[0].image_size, shards[0].mask_size
    img_ok = mask_ok = pt_ok = pad_ok = True
    seen = 0
    for b in sa1b.Loader(PATHS, batch=4, masks=3, points=4, seed=3, flip=0.5, threads=2):
        B = b["image"].shape[0]
        for r in range(B):
            if r >= b["count"]:
                pad_ok &= bool(b["image_id"][r] == -1 and not b["valid"][r].any()
                               and (b["labels"][r] == -1).all() and not b["image"][r].any())
                continue
            seen += 1
            sh, si = int(b["shard"][r]), int(b["shard_index"][r])
            meta = shards[sh].meta(si)
            w, h = b["content_size"][r]
            flipped = bool(b["flipped"][r])
            want = shards[sh].image(si)
            if flipped:
                want = mirror(want.transpose(0, 2, 1), w).transpose(0, 2, 1)
            img_ok &= bool(np.array_equal(b["image"][r], want) and meta["image_id"] == b["image_id"][r])
            ids = tables[sh]["id"][meta["first_mask"]:meta["first_mask"] + meta["n_masks"]]
            all_masks = shards[sh].masks(si)
            n = int(b["n_masks"][r])
            mask_ok &= n == min(3, meta["n_masks"]) and int(b["n_masks_total"][r]) == meta["n_masks"]
            longest = max(meta["orig_w"], meta["orig_h"])
            wr = max(1, int(np.floor(meta["orig_w"] * R / longest + 0.5)))
            for j in range(3):
                if j >= n:
                    mask_ok &= bool(not b["valid"][r, j] and b["mask_id"][r, j] == -1 and not b["masks"][r, j].any())
                    continue
                k = int(np.nonzero(ids == b["mask_id"][r, j])[0][0])
                want = all_masks[k]
                if flipped:
                    want = mirror(want, wr)
                mask_ok &= bool(b["valid"][r, j] and np.array_equal(b["masks"][r, j], want))
                for p in range(4):
                    x, y = b["points"][r, j, p]
                    lab = b["labels"][r, j, p]
                    if lab == -1:
                        continue
                    cx, cy = int((x + 0.5) * R // S), int((y + 0.5) * R // S)
                    inside = b["masks"][r, j, cy, cx] == 1
                    pt_ok &= bool(lab == (p % 2 == 0) and inside == (lab == 1))
    total = sum(len(s) for s in shards)
    tap.eq(seen, total, "every image once in the epoch")
    tap.ok(img_ok, "images are the shard's, mirrored within the content when flipped")
    tap.ok(mask_ok, "masks are the shard's masks named by mask_id, mirrored when flipped; padding empty")
    tap.ok(pt_ok, "even points positive and inside their mask, odd ones negative and outside")
    tap.ok(pad_ok, "rows that pad the short last batch: image_id -1, nothing valid, labels -1, zeros")


def batches(**kw):
    return [{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in b.items()}
            for b in sa1b.Loader(PATHS, **kw)]


def same_batches(x, y):
    return len(x) == len(y) and all(a.keys() == b.keys() and all(
        np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray) else a[k] == b[k] for k in a)
        for a, b in zip(x, y))


def check_lifetime():
    one = batches(batch=3, masks=2, points=2, seed=5, flip=0.5, threads=1, depth=2)
    two = batches(batch=3, masks=2, points=2, seed=5, flip=0.5, threads=2, depth=5)
    tap.ok(same_batches(one, two), "1 thread depth 2 and 2 threads depth 5: the same batches")
    norm = next(iter(sa1b.Loader(PATHS, batch=2, normalize=True)))
    tap.ok(norm["image"].dtype == np.float32 and norm["image"].shape[1] == 3, "normalize: [B, 3, S, S] float32")
    L = sa1b.Loader(PATHS, batch=2, depth=2, threads=1, epochs=None)
    b = next(L)
    img = b["image"]
    tap.ok(isinstance(img.base, sa1b._sa1b.View) and type(img.base.owner).__name__ == "Batch",
           "an array's base is a View of the Batch")
    tap.ok(img.base.owner is b["masks"].base.owner is b["labels"].base.owner,
           "every array of a batch views the same Batch")
    tap.eq(L.held, 1, "one batch held")
    b2 = next(L)
    tap.raises(ValueError, lambda: next(L), "asking for a third with depth 2 while two are held", match="held")
    tap.raises(ValueError, L.close, "close() refuses while batches are alive", match="alive")
    del b
    tap.eq(L.held, 2, "a batch lives while one of its arrays does")
    del img
    gc.collect()
    tap.eq(L.held, 1, "the last array gone, the batch went back")
    b3 = next(L)
    tap.ok(b3["image_id"][0] != -1, "and the loader goes on")
    b2["image"][...] = 7  # the arrays are the caller's to write while it holds them
    del b2, b3
    gc.collect()
    tap.eq(L.held, 0, "all batches back")
    tap.ok(L.close() is None, "close")
    tap.raises(ValueError, lambda: next(L), "next after close", match="closed")
    # the end of a with block while a batch lives: closed to every call at
    # once, freed when the batch dies (before: next() went on after the block
    # and the loader's threads lived until the object was collected)
    with sa1b.Loader(PATHS, batch=2, threads=1, epochs=None) as L:
        b = next(L)
    tap.raises(ValueError, lambda: next(L), "next() after the with block, a batch alive", match="closed")
    tap.ok(int(b["image_id"][0]) != -1, "the live batch's arrays are still readable")
    del b
    gc.collect()
    tap.eq(L.held, 0, "the batch went back")
    tap.raises(ValueError, lambda: next(L), "and the loader stays closed", match="closed")
    # the end of a with block while another thread is inside next(): that
    # next() ends with "closed", the loader is freed once it returns (before:
    # freed under the running next(): a hang or a use after free)
    import threading
    import time
    L = sa1b.Loader(PATHS * 4, batch=2, threads=1, depth=2, epochs=None)
    ended, got = [], []

    def consume():
        try:
            while True:
                next(L)
                got.append(1)
        except Exception as e:  # noqa: BLE001
            ended.append(e)
    t = threading.Thread(target=consume, daemon=True)
    t.start()
    while len(got) < 3 and not ended:
        time.sleep(0.01)
    L.__exit__(None, None, None)
    t.join(60)
    tap.ok(not t.is_alive() and len(ended) == 1 and isinstance(ended[0], ValueError) and "closed" in str(ended[0]),
           "__exit__ while another thread runs next(): it ends with ValueError 'closed'", diag=repr(ended))


def check_errors():
    tap.raises(OSError, lambda: sa1b.Loader(["no-such.shard"]), "a missing shard: OSError naming it",
               match="no-such.shard")
    tap.raises(ValueError, lambda: sa1b.Loader([]), "no shards")
    tap.raises(ValueError, lambda: sa1b.Loader(PATHS, rank=2, world=2), "rank >= world")
    tap.raises(ValueError, lambda: sa1b.Loader(PATHS, batch=0), "batch 0")
    tap.raises(ValueError, lambda: sa1b.Loader(PATHS, flip=1.5), "flip outside [0, 1]")
    tap.raises(ValueError, lambda: sa1b.Loader(PATHS, batch=-1), "a negative batch")
    tap.raises(ValueError, lambda: sa1b.Loader(PATHS, consumed=10 ** 6), "consumed beyond the epoch")
    tap.raises(ValueError, lambda: sa1b.Loader(PATHS, seed=2 ** 64), "seed 2^64", match="0..2^64-1")
    tap.raises(TypeError, lambda: sa1b.Loader(PATHS, bogus=1), "an unknown keyword")
    # numpy's integers are integers (before: "batch must be an integer")
    L = sa1b.Loader(PATHS, batch=np.int64(3), masks=np.uint8(2), seed=np.uint64(2 ** 64 - 1), epoch=np.int32(1))
    b = next(L)
    tap.eq((b["image"].shape[0], b["masks"].shape[1], b["epoch"]), (3, 2, 1), "numpy integers as batch, masks, epoch")
    del b
    L.close()
    tap.raises(ValueError, lambda: sa1b.Loader(PATHS, batch=2.0), "a float batch", match="integer")


def concurrent_inits(cls, args, threads=8):
    """how many of `threads` threads calling __init__ at once on one new
    object succeed (the others: ValueError 'already opened')"""
    import threading
    obj = cls.__new__(cls)
    start = threading.Barrier(threads)
    res = []

    def init():
        start.wait()
        try:
            obj.__init__(*args)
            res.append("ok")
        except ValueError as e:
            res.append(str(e))
    ts = [threading.Thread(target=init) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return res.count("ok"), res.count("Loader: already opened") + res.count("Shard: already opened")


def check_concurrent_init():
    # before: several opened (the GIL is released while the loader opens)
    # and the last one replaced the others, whose threads and buffers leaked
    got = [concurrent_inits(sa1b.Loader, (PATHS * 4,)) for _ in range(20)]
    tap.eq(set(got), {(1, 7)}, "Loader.__init__ from 8 threads at once, 20 times: one opens, 7 are refused")


def check_fork():
    """a child forked while a loader is open (multiprocessing, DataLoader
    workers) has a copy without its worker threads: next() raises there,
    and dropping it (or a batch) does not wait for them (before: next()
    handed out the copy's prefetched batches and then hung, as did the
    copy's close or collection)"""
    import time
    L = sa1b.Loader(PATHS, batch=2, threads=1, depth=2, epochs=None)
    b = next(L)
    time.sleep(0.2)  # the worker has filled the other buffer and waits: no lock is held at the fork
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        msg = ""
        try:
            next(L)
            msg += "next() gave a batch;"
        except RuntimeError as e:
            msg += "RuntimeError;" if "forked" in str(e) else "RuntimeError %s;" % e
        except BaseException as e:  # noqa: B902
            msg += "%s %s;" % (type(e).__name__, e)
        try:
            del b  # the parent's batch, dropped here
            gc.collect()
            L.close()
            msg += "closed"
        except BaseException as e:  # noqa: B902
            msg += "close: %s %s" % (type(e).__name__, e)
        os.write(wfd, msg.encode())
        os._exit(0)
    os.close(wfd)
    for _ in range(600):
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    with os.fdopen(rfd, "rb") as f:
        got = f.read().decode()
    tap.eq(got, "RuntimeError;closed", "a forked child: next() raises RuntimeError, close() returns")
    del b
    gc.collect()
    tap.eq(L.held, 0, "the parent's batch went back in the parent")
    b = next(L)
    tap.ok(b["image_id"][0] != -1, "and the parent's loader goes on")
    del b
    L.close()


def check_jpeg():
    if not JPEG:
        return
    from PIL import Image
    tap.eq(python_ids(JPEG, batch=3, seed=4, epochs=2), loadbench_ids(["-b", "3", "-s", "4", "-e", "2"], JPEG),
           "JPEG shards: order as sa1b-loadbench")
    shards = [sa1b.Shard(p) for p in JPEG]
    good = True
    for b in sa1b.Loader(JPEG, batch=4, threads=2):
        for r in range(b["count"]):
            payload = shards[b["shard"][r]].image(int(b["shard_index"][r])).tobytes()
            want = np.asarray(Image.open(io.BytesIO(payload)).convert("RGB"))
            w, h = b["content_size"][r]
            got = b["image"][r]
            good &= bool(np.array_equal(got[:h, :w], want[:h, :w]) and not got[h:].any() and not got[:, w:].any())
    tap.ok(good, "JPEG payloads decoded by the workers: PIL's decode inside the content, zeros outside")


def check_damaged():
    if DAMAGED is None:
        return
    n = len(sa1b.Shard(DAMAGED))
    L = sa1b.Loader([DAMAGED], batch=n, verify=True, threads=1)
    tap.raises(ValueError, lambda: next(L), "verify=True: the damaged sample raises, naming the shard",
               match=os.path.basename(DAMAGED))
    b = next(L)
    tap.eq(b["count"], n - 1, "the next call delivers the batch without it")
    ids = set(b["image_id"][:b["count"]].tolist())
    L2 = sa1b.Loader([DAMAGED], batch=n, verify=False, threads=1)
    tap.eq(len(set(next(L2)["image_id"].tolist()) - ids), 1, "exactly that one image is missing")


def check_manifest():
    """one path naming a manifest (*.json): its shards in its order, as the
    list of them; a list may name a shard twice (read twice), a manifest
    whose row lists another size is refused naming it"""
    with open("manifest.json", "w") as f:
        subprocess.run(["sa1b-inspect", "--manifest", *PATHS], check=True, stdout=f)
    tap.eq(python_ids(["manifest.json"], batch=4, seed=3), python_ids(batch=4, seed=3),
           "Loader('manifest.json'): the batches of its shards")
    tap.eq(python_ids("manifest.json", batch=4, seed=3), python_ids(batch=4, seed=3), "also as one str")
    n = sum(b["count"] for b in sa1b.Loader(PATHS[:1] * 2, batch=4))
    one = sum(b["count"] for b in sa1b.Loader(PATHS[:1], batch=4))
    tap.eq(n, 2 * one, "a list naming a shard twice reads it twice")
    import json
    m = json.load(open("manifest.json"))
    m["shards"][0]["bytes"] += 1
    m["bytes"] += 1
    json.dump(m, open("bad-manifest.json", "w"))
    tap.raises(Exception, lambda: sa1b.Loader("bad-manifest.json", batch=4), "a row that lists another size: refused",
               match="manifest")


if __name__ == "__main__":
    check_order()
    check_manifest()
    check_resume()
    check_content()
    check_lifetime()
    check_errors()
    check_concurrent_init()
    check_fork()
    check_damaged()
    check_jpeg()
    tap.done()
