"""test_shard.py GOOD... -- BAD... - sa1b.Shard reads every GOOD shard as
sa1b-inspect --rle prints it: header, every image row, the image payload
bytes, every mask (its RLE) and the mask table; views are read-only, keep
the map alive and are not copies; sa1b.verify passes it.  Every BAD file
(damaged copies) is rejected by sa1b-verify and raises ValueError naming
the file from sa1b.verify.  The built programs are found in PATH."""
import gc
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402
import sa1b  # noqa: E402
import sa1b.mask as mask_util  # noqa: E402


def f32(v):
    return float(np.float32(v))


def check_good(path):
    out = subprocess.run(["sa1b-inspect", "--rle", path], check=True, capture_output=True, text=True)
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    head = lines[0]
    images = [d for d in lines if d["type"] == "image"]
    masks = [d for d in lines if d["type"] == "mask"]
    s = sa1b.Shard(path)
    tag = os.path.basename(path)
    tap.eq(len(s), head["images"], "%s: len = images" % tag)
    tap.eq((s.image_size, s.mask_size, s.format, s.n_masks, s.file_size, s.version),
           (head["image_size"], head["mask_size"], head["image_format"], head["masks"],
            head["file_size"], head["version"]), "%s: header" % tag)
    tap.eq(json.loads(s.provenance), head["provenance"], "%s: provenance" % tag)
    data = open(path, "rb").read()
    S, R = s.image_size, s.mask_size
    meta_ok = pix_ok = mask_ok = True
    first = 0
    for d in images:
        i = d["index"]
        m = s.meta(i)
        want = dict(index=i, image_id=d["image_id"], orig_w=d["width"], orig_h=d["height"],
                    file_name=d["file_name"], n_masks=d["masks"], first_mask=first,
                    payload_offset=d["image_offset"], payload_len=d["image_bytes"])
        got = {k: m[k] for k in want}
        if got != want or f32(m["scale"]) != f32(d["scale"]):
            meta_ok = tap.ok(False, "%s: image %d metadata" % (tag, i), "got %r\nwant %r" % (m, d))
        first += d["masks"]
        img = s.image(i)
        raw = data[d["image_offset"]:d["image_offset"] + d["image_bytes"]]
        shape = (S, S, 3) if s.format == "raw" else (d["image_bytes"],)
        if img.shape != shape or img.dtype != np.uint8 or img.tobytes() != raw or img.flags.writeable:
            pix_ok = tap.ok(False, "%s: image %d payload" % (tag, i), "%s %s" % (img.shape, img.flags))
        um = s.masks(i)
        pm = s.masks(i, packed=True)
        mine = [d2 for d2 in masks if d2["index"] == i]
        if um.shape != (d["masks"], R, R) or pm.shape[0] != d["masks"] or pm.flags.writeable:
            mask_ok = tap.ok(False, "%s: image %d mask shapes" % (tag, i))
        for j, d2 in enumerate(mine):
            rle = mask_util.encode(np.asfortranarray(um[j]))
            bits = np.unpackbits(pm[j], bitorder="little")[:R * R].reshape(R, R)
            if rle["counts"].decode() != d2["mask_rle"]["counts"] or not np.array_equal(bits, um[j]):
                mask_ok = tap.ok(False, "%s: image %d mask %d" % (tag, i, j))
    tap.ok(meta_ok, "%s: every image's metadata as sa1b-inspect" % tag)
    tap.ok(pix_ok, "%s: every image payload is the file's bytes, read-only" % tag)
    tap.ok(mask_ok, "%s: every mask as sa1b-inspect's RLE, packed bits LSB first" % tag)
    t = s.mask_table()
    tap.eq(len(t), len(masks), "%s: mask table rows" % tag)
    tab_ok = True
    for k, d2 in enumerate(masks):
        row = t[k]
        pt = (d2.get("point_coords") or [[math.nan, math.nan]])[0]
        same = (row["id"] == d2["id"] and row["orig_area"] == d2["orig_area"]
                and f32(row["area"]) == f32(d2["area"])
                and [f32(v) for v in row["bbox"]] == [f32(v) for v in d2["bbox"]]
                and [f32(v) for v in row["orig_bbox"]] == [f32(v) for v in d2["orig_bbox"]]
                and f32(row["predicted_iou"]) == f32(d2["predicted_iou"])
                and f32(row["stability_score"]) == f32(d2["stability_score"])
                and np.array_equal(row["point"], np.array(pt, np.float32), equal_nan=True)
                and images[row["image_index"]]["image_id"] == d2["image_id"])
        if not same:
            tab_ok = tap.ok(False, "%s: mask table row %d" % (tag, k), "%r\n%r" % (row, d2))
    tap.ok(tab_ok, "%s: mask table as sa1b-inspect --masks" % tag)
    # a view keeps the map alive; the arrays are views, not copies
    if len(s):
        img = s.image(len(s) - 1)
        want = img.tobytes()
        del s
        gc.collect()
        tap.ok(img.tobytes() == want, "%s: an image view outlives its Shard object" % tag)
        tap.ok(isinstance(img.base, sa1b._sa1b.View) and isinstance(img.base.owner, sa1b.Shard),
               "%s: the view's base holds the shard" % tag, repr(img.base))
        tap.raises(ValueError, lambda: img.__setitem__(0, 1), "%s: views are read-only" % tag)
        s = sa1b.Shard(path)
        tap.raises(IndexError, lambda: s.image(len(s)), "%s: index past the end" % tag)
        tap.raises(ValueError, lambda: s.__init__(path), "%s: __init__ again is refused (views may live)" % tag)
        tap.eq(s.meta(-1)["index"], len(s) - 1, "%s: negative index from the end" % tag)
    tap.ok(sa1b.verify(path) is None, "%s: sa1b.verify passes" % tag)


def check_bad(path):
    tag = os.path.basename(path)
    rc = subprocess.run(["sa1b-verify", "-q", path], capture_output=True).returncode
    tap.eq(rc, 1, "%s: sa1b-verify says damaged" % tag)
    tap.raises(ValueError, lambda: sa1b.verify(path), "%s: sa1b.verify raises ValueError naming it" % tag,
               match=tag)
    try:
        s = sa1b.Shard(path)
    except ValueError as e:
        tap.ok(tag in str(e), "%s: Shard() raises ValueError naming it" % tag, e)
        return
    tap.raises(ValueError, lambda: [s.verify_image(i) for i in range(len(s))],
               "%s: opens, and verify_image finds the damaged image" % tag, match="CRC32C")


def check_hostile(path, tmpdir):
    """random byte changes and cuts of a good shard: Shard() either raises
    ValueError/OSError or gives a shard whose every accessor works or
    raises ValueError; never a crash (the suite runs this under ASan)"""
    data = bytearray(open(path, "rb").read())
    rng = np.random.default_rng(7)
    bad = os.path.join(tmpdir, "hostile.shard")
    outcomes = set()
    for k in range(300):
        d = bytearray(data)
        if k % 3 == 0:
            d = d[:int(rng.integers(0, len(d)))]
        else:
            for _ in range(int(rng.integers(1, 4))):
                d[int(rng.integers(0, len(d)))] = int(rng.integers(0, 256))
        with open(bad + ".tmp", "wb") as f:
            f.write(d)
        os.replace(bad + ".tmp", bad)  # a new file: earlier maps keep theirs
        try:
            s = sa1b.Shard(bad)
        except (ValueError, OSError):
            outcomes.add("refused")
            continue
        try:
            for i in range(len(s)):
                s.meta(i), s.image(i).sum(), s.masks(i).sum(), s.masks(i, packed=True).sum()
                s.verify_image(i)
            s.mask_table()
            sa1b.verify(bad)
            outcomes.add("intact")
        except ValueError:
            outcomes.add("damage found")
    tap.ok("refused" in outcomes and "damage found" in outcomes and outcomes <= {"refused", "intact", "damage found"},
           "300 random corruptions of %s: refused at open or found by verify, never a crash"
           % os.path.basename(path), outcomes)


def check_rewritten(path, tmpdir):
    """a shard rewritten in place while open (its first index row's image
    offset, same size): the accessors raise ValueError, never read outside
    the file (before: a segmentation fault)"""
    mod = os.path.join(tmpdir, "rewritten.shard")
    with open(path, "rb") as f, open(mod, "wb") as g:
        g.write(f.read())
    s = sa1b.Shard(mod)
    idx = int(subprocess.run(["sa1b-inspect", mod], capture_output=True, text=True, check=True)
              .stdout.split('"index_offset": ')[1].split(",")[0])
    with open(mod, "r+b") as f:  # the same file, written in place
        f.seek(idx)
        f.write(struct.pack("<Q", 1 << 40))
    tap.raises(ValueError, lambda: s.image(0), "an index row rewritten in place while open: ValueError",
               match="changed since the shard was opened")


if __name__ == "__main__":
    cut = sys.argv.index("--")
    check_rewritten(sys.argv[1], os.path.dirname(os.path.abspath(sys.argv[1])))
    for good in sys.argv[1:cut]:
        check_good(good)
    check_hostile(sys.argv[1], os.path.dirname(os.path.abspath(sys.argv[1])))
    for bad in sys.argv[cut + 1:]:
        check_bad(bad)
    tap.raises(OSError, lambda: sa1b.Shard("no-such.shard"), "a missing file is OSError naming it",
               match="no-such.shard")
    tap.raises(TypeError, lambda: sa1b.Shard(), "Shard() needs a path")
    # Shard.__init__ from 8 threads at once (before: several opened, the
    # last replaced the others' maps, which leaked)
    from test_loader import concurrent_inits
    got = [concurrent_inits(sa1b.Shard, (sys.argv[1],)) for _ in range(20)]
    tap.eq(set(got), {(1, 7)}, "Shard.__init__ from 8 threads at once, 20 times: one opens, 7 are refused")
    # a name that is not UTF-8: escaped in the message (before: Shard's
    # message lost the name, the Loader's was empty)
    tap.raises(OSError, lambda: sa1b.Shard(b"no-such-\xff.shard"), "Shard: a missing file not named in UTF-8",
               match="no-such-\\udcff.shard': cannot open")
    tap.raises(OSError, lambda: sa1b.Loader([b"no-such-\xff.shard"]), "Loader: a missing file not named in UTF-8",
               match="no-such-\\xff.shard': cannot open")
    tap.done()
