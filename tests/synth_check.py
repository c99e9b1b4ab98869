#!/usr/bin/python3
"""synth_check.py - checks that a tar written by sa1b-synth is SA-1B in every
detail, with an implementation of the COCO RLE string code of its own (plain
Python, no numpy needed), so that it does not trust the codec under test.

usage: synth_check.py TAR [--images N] [--first-id ID] [--width W] [--height H]
                          [--masks M] [--quirks] [--pixels] [--flat] [--digest]

Prints one line per problem and "ok: N images, M masks" at the end; exits 1
on any problem.  --quirks requires, over the whole tar, every quirk of the
real files: int and float bboxes, ids above 2^31, an escaped backslash in a
counts string, a predicted_iou above 1.  --pixels (needs PIL and numpy) also
checks that each mask is visible in the picture: the mean colour inside the
mask differs from the mean colour of the pixels just outside it, and that
each point lies deep inside its mask: its 4-neighbour depth (erosions it
survives, plus one) is at least half the mask's largest 8-neighbour depth,
which sa1b-synth's rule (at least half the deepest 3-4 chamfer distance)
implies.  --flat
requires that no two masks of an image share a pixel (sa1b-synth --nesting
flat).  --digest also prints "digest: SHA256" over every counts string in
order, a fingerprint of the masks that does not depend on the JSON writer.
"""
import argparse
import hashlib
import io
import json
import os
import re
import struct
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coco_rle  # noqa: E402

problems = []


def bad(msg):
    problems.append(msg)
    if len(problems) <= 30:
        print("synth_check: " + msg)


rle_from_string = coco_rle.runs


def mask_stats(cnts, h, w):
    """area, SA-1B bbox [x, y, max-min x, max-min y], foreground starts/lengths"""
    area = 0
    pos = 0
    x0 = y0 = 1 << 62
    x1 = y1 = -1
    fg = []
    for i, c in enumerate(cnts):
        if c < 0:
            raise ValueError("negative run %d at %d" % (c, i))
        if i % 2 == 1 and c > 0:
            area += c
            fg.append((pos, c))
            a, b = pos, pos + c - 1
            ca, cb = a // h, b // h
            x0 = min(x0, ca)
            x1 = max(x1, cb)
            if ca == cb:
                y0 = min(y0, a % h)
                y1 = max(y1, b % h)
            else:
                # rows a%h..h-1 of column ca, then 0..b%h of column cb
                y0 = 0
                y1 = h - 1
        pos += c
    if area == 0:
        return 0, [0, 0, 0, 0], fg, pos
    return area, [x0, y0, x1 - x0, y1 - y0], fg, pos


def inside(fg, idx):
    lo, hi = 0, len(fg)
    while lo < hi:
        mid = (lo + hi) // 2
        if fg[mid][0] <= idx:
            lo = mid + 1
        else:
            hi = mid
    return lo > 0 and idx < fg[lo - 1][0] + fg[lo - 1][1]


def jpeg_size(data):
    """(width, height) from the SOF marker, or None"""
    if data[:2] != b"\xff\xd8" or data[-2:] != b"\xff\xd9":
        return None
    p = 2
    while p + 4 <= len(data):
        if data[p] != 0xFF:
            return None
        m = data[p + 1]
        ln = struct.unpack(">H", data[p + 2:p + 4])[0]
        if m in (0xC0, 0xC1, 0xC2):
            hh, ww = struct.unpack(">HH", data[p + 5:p + 9])
            return ww, hh
        p += 2 + ln
    return None


def ordered(pairs):
    return pairs  # keep key order: a list of (key, value)


def as_dict(pairs):
    return dict(pairs)


IMAGE_KEYS = ["image_id", "width", "height", "file_name"]
ANN_KEYS = ["bbox", "area", "segmentation", "predicted_iou", "point_coords", "crop_box", "id",
            "stability_score"]


def overlaps(fgs):
    """the first pair (i, j) of masks sharing a pixel, or None; fgs holds
    each mask's sorted foreground (start, length) runs"""
    ev = sorted((start, start + ln, i) for i, fg in enumerate(fgs) for start, ln in fg)
    for (a0, a1, i), (b0, b1, j) in zip(ev, ev[1:]):
        if b0 < a1:
            return i, j
    return None


def check_json(name, raw, args, want_id, jpg_dims, quirks, pixels, digest):
    text = raw.decode("utf-8")
    if "\n" in text.rstrip("\n") or text.endswith("\n"):
        bad("%s: not a single line" % name)
    if not text.startswith('{"image": {"image_id": '):
        bad("%s: does not start like a published file: %r" % (name, text[:40]))
    top = json.loads(text, object_pairs_hook=ordered)
    if [k for k, _ in top] != ["image", "annotations"]:
        bad("%s: top-level keys %r" % (name, [k for k, _ in top]))
        return 0
    top = dict(top)
    image = top["image"]
    if [k for k, _ in image] != IMAGE_KEYS:
        bad("%s: image keys %r" % (name, [k for k, _ in image]))
    image = dict(image)
    for k in ("image_id", "width", "height"):
        if type(image.get(k)) is not int:
            bad("%s: image.%s is not an integer" % (name, k))
    if image.get("image_id") != want_id:
        bad("%s: image_id %r, want %d" % (name, image.get("image_id"), want_id))
    if image.get("file_name") != "sa_%d.jpg" % want_id:
        bad("%s: file_name %r" % (name, image.get("file_name")))
    w, h = image.get("width"), image.get("height")
    if args.width and w != args.width or args.height and h != args.height:
        bad("%s: size %rx%r, want %dx%d" % (name, w, h, args.width, args.height))
    if jpg_dims != (w, h):
        bad("%s: JPEG is %r, JSON says %rx%r" % (name, jpg_dims, w, h))
    anns = top["annotations"]
    if args.masks is not None:
        lo = max(0, int(args.masks * 0.8) - 2)
        if not (lo <= len(anns) <= args.masks):
            bad("%s: %d masks for a target of %d" % (name, len(anns), args.masks))
    min_area = max(4, w * h // 100000)
    seen = set()
    ids = []
    fgs = []
    for k, pairs in enumerate(anns):
        where = "%s: mask %d" % (name, k)
        keys = [kk for kk, _ in pairs]
        if keys != ANN_KEYS:
            bad("%s: keys %r" % (where, keys))
            continue
        a = dict(pairs)
        seg = dict(a["segmentation"])
        if [kk for kk, _ in a["segmentation"]] != ["size", "counts"]:
            bad("%s: segmentation keys" % where)
        if seg["size"] != [h, w] or any(type(v) is not int for v in seg["size"]):
            bad("%s: size %r, want [%d, %d]" % (where, seg["size"], h, w))
        counts = seg["counts"]
        if type(counts) is not str:
            bad("%s: counts is not a string" % where)
            continue
        digest.update(counts.encode("ascii") + b"\n")
        if counts in seen:
            bad("%s: the same mask twice" % where)
        seen.add(counts)
        if "\\" in counts:
            quirks["backslash"] += 1
        try:
            cnts = rle_from_string(counts)
            area, bbox, fg, total = mask_stats(cnts, h, w)
        except ValueError as e:
            bad("%s: counts: %s" % (where, e))
            continue
        if total != h * w:
            bad("%s: run sum %d != %dx%d" % (where, total, h, w))
            continue
        fgs.append(fg)
        # the writer's own encoding: no empty runs after the first, canonical
        if any(c == 0 for c in cnts[1:]):
            bad("%s: an empty run after the first" % where)
        if type(a["area"]) is not int or a["area"] != area:
            bad("%s: area %r, decoded %d" % (where, a["area"], area))
        if area < min_area:
            bad("%s: area %d below %d" % (where, area, min_area))
        bb = a["bbox"]
        if len(bb) != 4 or not all(type(v) in (int, float) for v in bb):
            bad("%s: bbox %r" % (where, bb))
            continue
        kinds = {type(v) for v in bb}
        if kinds == {int}:
            quirks["int_bbox"] += 1
        elif kinds == {float}:
            quirks["float_bbox"] += 1
        else:
            bad("%s: bbox mixes ints and floats" % where)
        if [float(v) for v in bb] != [float(v) for v in bbox]:
            bad("%s: bbox %r, decoded mask gives %r" % (where, bb, bbox))
        piou = a["predicted_iou"]
        if type(piou) is not float or not (0.5 < piou < 1.05):
            bad("%s: predicted_iou %r" % (where, piou))
        elif piou > 1.0:
            quirks["iou_over_1"] += 1
        st = a["stability_score"]
        if type(st) is not float or not (0.8 < st <= 1.0):
            bad("%s: stability_score %r" % (where, st))
        pc = a["point_coords"]
        if (type(pc) is not list or len(pc) != 1 or len(pc[0]) != 2
                or not all(type(v) is float for v in pc[0])):
            bad("%s: point_coords %r" % (where, pc))
        else:
            px, py = pc[0]
            ix, iy = int(px), int(py)
            if not (0 <= px < w and 0 <= py < h) or not inside(fg, ix * h + iy):
                bad("%s: point %r is not inside the mask" % (where, pc[0]))
            if px * 16 != int(px * 16) or py * 16 != int(py * 16):
                bad("%s: point %r is not a multiple of 1/16" % (where, pc[0]))
        cb = a["crop_box"]
        if len(cb) != 4 or len({type(v) for v in cb}) != 1 or type(cb[0]) not in (int, float):
            bad("%s: crop_box %r" % (where, cb))
        else:
            cx, cy, cw, ch = cb
            if not (0 <= cx and 0 <= cy and cx + cw <= w and cy + ch <= h and cw > 0 and ch > 0):
                bad("%s: crop_box %r outside the image" % (where, cb))
            elif not (cx <= bbox[0] and bbox[0] + bbox[2] < cx + cw and cy <= bbox[1]
                      and bbox[1] + bbox[3] < cy + ch):
                bad("%s: crop_box %r does not hold bbox %r" % (where, cb, bbox))
        aid = a["id"]
        if type(aid) is not int or aid <= 2**31:
            bad("%s: id %r is not above 2^31" % (where, aid))
        else:
            quirks["big_id"] += 1
            if aid > 2**32:
                quirks["id_over_2_32"] += 1
        ids.append(aid)
        if pixels is not None:
            pixels.append((cnts, h, w, pc[0]))
    if len(set(ids)) != len(ids):
        bad("%s: duplicate annotation ids" % name)
    if args.flat:
        pair = overlaps(fgs)
        if pair:
            bad("%s: masks %d and %d overlap" % (name, pair[0], pair[1]))
    # escaping: every backslash of a counts string is written as \\ (and
    # nothing else is escaped: counts use 48..111 only)
    if quirks["backslash"] and "\\\\" not in text:
        bad("%s: a counts backslash is not escaped" % name)
    return len(anns)


def check_pixels(jpg, masks, name):
    try:
        import numpy as np
        from PIL import Image
    except ImportError:
        return
    img = np.asarray(Image.open(io.BytesIO(jpg)).convert("RGB")).astype(np.float64)
    def erode(m, square):
        p = np.pad(m, 1)
        e = m & p[:-2, 1:-1] & p[2:, 1:-1] & p[1:-1, :-2] & p[1:-1, 2:]
        if square:
            e &= p[:-2, :-2] & p[:-2, 2:] & p[2:, :-2] & p[2:, 2:]
        return e

    for k, (cnts, h, w, pt) in enumerate(masks):
        flat = np.zeros(h * w, dtype=bool)
        pos = 0
        for i, c in enumerate(cnts):
            if i % 2:
                flat[pos:pos + c] = True
            pos += c
        m = flat.reshape(w, h).T
        # the ring of pixels just outside the mask (4-neighbours)
        ring = np.zeros_like(m)
        ring[1:, :] |= m[:-1, :]
        ring[:-1, :] |= m[1:, :]
        ring[:, 1:] |= m[:, :-1]
        ring[:, :-1] |= m[:, 1:]
        ring &= ~m
        # depth of the point: 4-neighbour erosions survived, plus one,
        # against half the deepest 8-neighbour depth
        d8max, cur = 0, m
        while cur.any():
            d8max += 1
            cur = erode(cur, True)
        ix, iy = int(pt[0]), int(pt[1])
        d4, cur = 0, m
        while cur[iy, ix]:
            d4 += 1
            cur = erode(cur, False)
        if 2 * d4 < d8max:
            bad("%s: mask %d: point %r at depth %d, the mask is %d deep" % (name, k, pt, d4, d8max))
        if not ring.any():
            continue  # the mask is the whole image
        inner = img[m].mean(axis=0)
        outer = img[ring].mean(axis=0)
        if np.abs(inner - outer).max() < 4.0:
            bad("%s: mask %d is not visible in the picture (inside %s, outside %s)"
                % (name, k, inner.round(1), outer.round(1)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tar")
    ap.add_argument("--images", type=int)
    ap.add_argument("--first-id", type=int, default=1)
    ap.add_argument("--width", type=int)
    ap.add_argument("--height", type=int)
    ap.add_argument("--masks", type=int)
    ap.add_argument("--quirks", action="store_true")
    ap.add_argument("--pixels", action="store_true")
    ap.add_argument("--flat", action="store_true")
    ap.add_argument("--digest", action="store_true")
    args = ap.parse_args()

    raw = open(args.tar, "rb").read()
    if len(raw) < 1024 or len(raw) % 512:
        bad("tar size %d is not a whole number of 512-byte blocks" % len(raw))
    if raw[257:265] != b"ustar\x0000":
        bad("first header is not ustar: %r" % raw[257:265])
    quirks = dict(int_bbox=0, float_bbox=0, big_id=0, id_over_2_32=0, backslash=0, iou_over_1=0)
    n_images = n_masks = 0
    digest = hashlib.sha256()
    with tarfile.open(args.tar, "r:") as tf:
        members = tf.getmembers()
        if len(members) % 2:
            bad("odd number of members: %d" % len(members))
        for i in range(0, len(members) - 1, 2):
            want = args.first_id + i // 2
            mj, mn = members[i], members[i + 1]
            if mj.name != "sa_%d.jpg" % want or mn.name != "sa_%d.json" % want:
                bad("members %d, %d: %s, %s (want sa_%d.jpg then sa_%d.json)"
                    % (i, i + 1, mj.name, mn.name, want, want))
            for m in (mj, mn):
                if (not m.isreg() or m.mode != 0o644 or m.mtime != 1680307200 or m.uid != 0
                        or m.gid != 0 or m.uname != "root" or m.gname != "root"):
                    bad("%s: header mode %o mtime %d uid %d gid %d %s:%s"
                        % (m.name, m.mode, m.mtime, m.uid, m.gid, m.uname, m.gname))
            jpg = tf.extractfile(mj).read()
            dims = jpeg_size(jpg)
            if dims is None:
                bad("%s: not a baseline JPEG" % mj.name)
            pixels = [] if args.pixels else None
            try:
                n_masks += check_json(mn.name, tf.extractfile(mn).read(), args, want, dims, quirks,
                                      pixels, digest)
            except (ValueError, KeyError, TypeError) as e:
                bad("%s: %s" % (mn.name, e))
            if pixels:
                check_pixels(jpg, pixels, mn.name)
            n_images += 1
    if args.images is not None and n_images != args.images:
        bad("%d images, want %d" % (n_images, args.images))
    if args.quirks:
        for q in ("int_bbox", "float_bbox", "big_id", "backslash", "iou_over_1"):
            if not quirks[q]:
                bad("quirk never seen: %s" % q)
    if problems:
        print("synth_check: %d problems" % len(problems))
        return 1
    if args.digest:
        print("digest: " + digest.hexdigest())
    print("ok: %d images, %d masks, quirks %s" % (n_images, n_masks,
          " ".join("%s=%d" % kv for kv in sorted(quirks.items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
