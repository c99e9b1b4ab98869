"""test_mask.py - sa1b.mask against pycocotools.mask itself (installed from
PyPI in the tests' virtual environment; those checks skip without it):
every function on random masks of many sizes, the edge cases maskApi
documents, polygons and boxes, and the real SA-1B annotations in
../shared/data/sa1b-real when present; then what sa1b.mask adds (validated
strings, decoding at another size, SA-1B boxes), which needs no reference.
Results must be identical: values, dtypes, shapes and memory orders."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402
import sa1b.mask as S  # noqa: E402

try:
    import pycocotools.mask as P
except ImportError:
    P = None

# the real annotations where tests/test-lib.sh finds them: ../shared beside
# the source tree, else $SA1B_SHARED
SHARED = next((d for d in (os.path.join(os.environ.get("top_srcdir", "."), "..", "shared", "data", "sa1b-real"),
                           os.path.join(os.environ.get("SA1B_SHARED", "/nonexistent"), "data", "sa1b-real"))
               if os.path.isdir(d)), "/nonexistent")


def same_array(a, b):
    """identical values, dtype, shape and memory order"""
    return (type(a) is type(b) and isinstance(a, np.ndarray) and a.dtype == b.dtype
            and a.shape == b.shape and a.flags.c_contiguous == b.flags.c_contiguous
            and a.flags.f_contiguous == b.flags.f_contiguous and np.array_equal(a, b))


def describe(a):
    if isinstance(a, np.ndarray):
        return "%s %s %s C=%s F=%s" % (type(a).__name__, a.dtype, a.shape, a.flags.c_contiguous,
                                       a.flags.f_contiguous)
    return "%s %r" % (type(a).__name__, a)


def agree(fn, desc):
    """fn(module) gives the same with pycocotools and with sa1b.mask (the
    same exception type when it raises)."""
    out = []
    for mod in (P, S):
        try:
            out.append(("ok", fn(mod)))
        except Exception as e:  # both must fail alike
            out.append(("raise", type(e).__name__))
    (ka, a), (kb, b) = out
    if ka == "ok" and kb == "ok" and isinstance(a, np.ndarray):
        good = same_array(a, b)
    else:
        good = ka == kb and type(a) is type(b) and (
            np.array_equal(a, b) if isinstance(a, np.generic) else a == b)
    return tap.ok(good, desc, "pycocotools: %s\nsa1b:        %s" % (describe(a), describe(b)))


def random_masks(rng, h, w, n):
    """n masks of h x w: blobs, noise, empty and full, in Fortran order"""
    m = np.zeros((h, w, n), np.uint8, order="F")
    for k in range(n):
        kind = k % 4
        if kind == 0 and h and w:
            yy, xx = np.mgrid[0:h, 0:w]
            cy, cx, r = rng.integers(0, h), rng.integers(0, w), rng.integers(1, max(h, w) + 1)
            m[:, :, k] = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
        elif kind == 1:
            m[:, :, k] = rng.random((h, w)) < rng.random()
        elif kind == 3:
            m[:, :, k] = 1
    return m


def check_reference():
    if P is None:
        tap.skip(1, "no pycocotools in the virtual environment (PyPI unreachable?)")
        return
    rng = np.random.default_rng(17)
    sizes = [(1, 1), (1, 37), (37, 1), (2, 3), (17, 29), (64, 48), (255, 256), (1500, 2250)]
    for h, w in sizes:
        n = 5 if h * w < 10 ** 6 else 2
        m = random_masks(rng, h, w, n)
        tag = "%dx%d" % (h, w)
        agree(lambda M: M.encode(m), "encode %s x%d (with empty and full)" % (tag, n))
        agree(lambda M: M.encode(np.ascontiguousarray(m[:, :, 0])), "encode %s 2-D C order" % tag)
        big = np.asfortranarray(m * rng.integers(1, 256, m.shape, dtype=np.uint8))
        tap.eq(S.encode(big), P.encode(np.asfortranarray((big != 0).astype(np.uint8))),
               "encode %s: any nonzero byte is foreground (pycocotools toggles on each value)" % tag)
        rles = P.encode(m)
        agree(lambda M: M.decode(rles), "decode %s: [h, w, n] uint8 Fortran order" % tag)
        agree(lambda M: M.decode(rles[0]), "decode %s one object: [h, w]" % tag)
        agree(lambda M: M.area(rles), "area %s: uint32 [n]" % tag)
        agree(lambda M: M.area(rles[1]), "area %s one object: uint32 scalar" % tag)
        agree(lambda M: M.toBbox(rles), "toBbox %s: float64 [n, 4]" % tag)
        agree(lambda M: M.toBbox(rles[0]), "toBbox %s one object" % tag)
        crowd = [k % 2 for k in range(n)]
        agree(lambda M: M.iou(rles, rles[::-1], crowd), "iou %s with iscrowd: [m, n] Fortran" % tag)
        agree(lambda M: M.iou(rles[:1], rles, [0] * n), "iou %s 1 x n" % tag)
        agree(lambda M: M.merge(rles), "merge %s union" % tag)
        agree(lambda M: M.merge(rles, intersect=1), "merge %s intersection" % tag)
        agree(lambda M: M.merge(rles[:1]), "merge %s of one" % tag)
        str_rles = [{"size": r["size"], "counts": r["counts"].decode()} for r in rles]
        agree(lambda M: M.decode(str_rles), "decode %s from str counts" % tag)
    # sizes with no pixels (pycocotools' answers for them, kept)
    for shape in [(0, 5), (5, 0), (0, 0)]:
        agree(lambda M: M.encode(np.zeros(shape, np.uint8)), "encode %dx%d" % shape)
    agree(lambda M: M.encode(np.zeros((3, 5, 0), np.uint8, order="F")), "encode of n = 0")
    agree(lambda M: M.merge([]), "merge of nothing")
    agree(lambda M: M.area([]), "area of nothing")
    agree(lambda M: M.toBbox([]), "toBbox of nothing")
    agree(lambda M: M.iou([], [], []), "iou of nothing")
    # misuse raises alike
    agree(lambda M: M.encode(np.zeros((3, 5, 2), np.uint8)), "encode refuses C order")
    agree(lambda M: M.encode(np.zeros((3, 5, 2), np.float64, order="F")), "encode refuses float64")
    agree(lambda M: M.encode(np.zeros((3, 5), bool)), "encode refuses a C-order bool [h, w] (its order)")
    r2 = P.encode(random_masks(rng, 6, 7, 2))
    agree(lambda M: M.iou(r2, r2, [0]), "iou refuses an iscrowd of the wrong length")
    agree(lambda M: M.iou(r2, np.zeros((2, 4)), [0, 0]), "iou refuses RLEs against boxes")
    agree(lambda M: M.frPyObjects("x", 4, 5), "frPyObjects refuses a str")
    agree(lambda M: M.frPyObjects([[1, 1, 3, 3]], 4, 5), "frPyObjects on a list of boxes (TypeError)")
    agree(lambda M: M.decode({"size": [4, 5], "counts": [1, 2, 17]}), "decode refuses uncompressed counts")
    # boxes, polygons, uncompressed RLEs
    for h, w in [(1, 1), (7, 9), (40, 31), (480, 640)]:
        bb = rng.random((6, 4)) * [w, h, w, h] * 1.2 - [2, 2, 0, 0]
        agree(lambda M: M.frPyObjects(bb, h, w), "frPyObjects boxes %dx%d" % (h, w))
        agree(lambda M: M.iou(bb, bb[::-1], [0, 1, 0, 1, 0, 1]), "iou of boxes %dx%d" % (h, w))
        agree(lambda M: M.iou(bb.tolist(), bb.tolist()[:2], [1, 0]), "iou of box lists %dx%d" % (h, w))
        polys = [[float(v) for v in rng.random(2 * k) * (max(h, w) + 6) - 3] for k in (3, 4, 7, 30)]
        agree(lambda M: M.frPyObjects(polys, h, w), "frPyObjects polygons %dx%d" % (h, w))
        agree(lambda M: M.frPyObjects(polys[2], h, w),
              "frPyObjects of one flat polygon %dx%d (pycocotools 2.0: TypeError, kept)" % (h, w))
        square = [0.0, 0.0, w * 0.5, 0.0, w * 0.5, h * 0.5, 0.0, h * 0.5, 0.0, 0.0]
        agree(lambda M: M.frPyObjects([square, square[::-1]], h, w), "polygon with a repeated vertex %dx%d" % (h, w))
        runs = P.frPyObjects([{"size": [h, w], "counts": [h * w]}], h, w)
        agree(lambda M: M.frPyObjects([{"size": [h, w], "counts": [h * w]}], h, w), "frPyObjects uncompressed %dx%d" % (h, w))
        agree(lambda M: M.frPyObjects({"size": [h, w], "counts": [0, h * w]}, h, w), "frPyObjects one uncompressed %dx%d" % (h, w))
        agree(lambda M: M.decode(runs), "decode of frPyObjects' output %dx%d" % (h, w))


def real_annotations():
    """(name, [RLE dict], [bbox], [area]) of the real SA-1B files, or []"""
    out = []
    path = os.path.join(SHARED, "sa_226381.json")
    if os.path.exists(path):
        with open(path) as f:
            anns = json.load(f)["annotations"]
        out.append(("sa_226381.json", [a["segmentation"] for a in anns], [a["bbox"] for a in anns],
                    [a["area"] for a in anns]))
    path = os.path.join(SHARED, "snippets_other_real_annotations.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                d = json.loads(line)
                a = d["annotation"]
                out.append(("sa_%d" % d["image"]["image_id"], [a["segmentation"]], [a["bbox"]], [a["area"]]))
    return out


def check_real():
    real = real_annotations()
    if not real:
        tap.skip(1, "no real SA-1B data (../shared/data/sa1b-real beside the source tree, or $SA1B_SHARED/data/sa1b-real)")
        return
    for name, rles, bboxes, areas in real:
        tap.ok(np.array_equal(S.area(rles), np.array(areas, np.uint32)), "%s: area = the files' area" % name)
        tap.ok(np.array_equal(S.sa1b_bbox(rles), np.array(bboxes, np.float64)),
               "%s: sa1b_bbox = the files' bbox" % name)
        m = S.decode(rles)
        back = S.encode(m)
        tap.ok([r["counts"] for r in back] == [r["counts"].encode() for r in rles],
               "%s: encode(decode(x)) gives the files' strings" % name)
        if P is None:
            continue
        agree(lambda M: M.decode(rles), "%s: decode (%d masks)" % (name, len(rles)))
        agree(lambda M: M.toBbox(rles), "%s: toBbox" % name)
        agree(lambda M: M.area(rles), "%s: area" % name)
        agree(lambda M: M.encode(m), "%s: encode" % name)
        agree(lambda M: M.iou(rles, rles[:8], [i % 2 for i in range(len(rles[:8]))]), "%s: iou" % name)
        agree(lambda M: M.merge(rles), "%s: merge" % name)
        agree(lambda M: M.merge(rles, 1), "%s: merge intersect" % name)


def check_extensions():
    # the 3x4 example of sa1b_rle.h: 0100 / 0110 / 0010 -> runs 3,2,2,2,3
    m = np.asfortranarray(np.array([[0, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 0]], np.uint8))
    r = S.encode(m)
    tap.eq(r, {"size": [3, 4], "counts": b"32201"}, "encode of the documented 3x4 mask")
    tap.ok(np.array_equal(S.decode(r), m), "and back")
    tap.ok(np.array_equal(S.toBbox(r), [1, 0, 2, 3]) and np.array_equal(S.sa1b_bbox(r), [1, 0, 1, 2]),
           "toBbox is COCO's, sa1b_bbox one less in w and h")
    tap.ok(np.array_equal(S.sa1b_bbox(S.encode(np.zeros((3, 3), np.uint8, order="F"))), [0, 0, 0, 0]),
           "sa1b_bbox of an empty mask is zeros")
    # validated strings: pycocotools reads past the end of these
    for counts, what in [(b"32x01", "bad character 'x'"), ("3220", "run sum"), (b"3", "run sum"),
                         (b"32201\x00", "bad byte 0x00"), ("\\", "ends inside"), (b"32201" + b"0" * 5, "run sum")]:
        tap.raises(ValueError, lambda: S.decode({"size": [3, 4], "counts": counts}),
                   "decode refuses %r (%s)" % (counts, what), match=what)
    tap.raises(ValueError, lambda: S.area([r, {"size": [3, 4], "counts": "3x"}]), "area names the bad object",
               match="rles[1]")
    tap.raises(ValueError, lambda: S.decode([r, S.encode(np.zeros((4, 3), np.uint8, order="F"))]),
               "decode refuses masks of different sizes", match="differs")
    tap.raises(ValueError, lambda: S.iou([r], [S.encode(np.zeros((4, 3), np.uint8, order="F"))], [0]),
               "iou refuses masks of different sizes")
    tap.raises(ValueError, lambda: S.merge([r, S.encode(np.zeros((4, 3), np.uint8, order="F"))]),
               "merge refuses masks of different sizes")
    tap.raises(OverflowError, lambda: S.decode({"size": [-1, 4], "counts": "0"}), "negative size")
    tap.raises(ValueError, lambda: S.decode({"size": [70000, 70000], "counts": "0"}), "more than 2^32-1 pixels")
    tap.raises(KeyError, lambda: S.decode({"size": [3, 4]}), "no counts")
    tap.raises(TypeError, lambda: S.decode({"size": [3, 4], "counts": 5}), "counts of the wrong type")
    tap.raises(ValueError, lambda: S.frPyObjects([{"size": [3, 4], "counts": [3, 2]}], 3, 4),
               "uncompressed runs that do not add up to h*w", match="rles[0]")
    # decode straight from the runs at another size = full decode then resize
    rng = np.random.default_rng(5)
    for h, w, rh, rw in [(37, 53, 8, 8), (1500, 2250, 256, 256), (9, 4, 27, 12), (1, 1, 3, 3)]:
        ms = random_masks(rng, h, w, 4)
        rles = S.encode(ms)
        near = S.decode(rles, size=(rh, rw))
        ys = ((2 * np.arange(rh) + 1) * h) // (2 * rh)
        xs = ((2 * np.arange(rw) + 1) * w) // (2 * rw)
        want = np.asfortranarray(ms[ys][:, xs])
        tap.ok(same_array(near, want), "decode size=(%d, %d) nearest from %dx%d = full decode + nearest"
               % (rh, rw, h, w), describe(near))
        area = S.decode(rles, size=(rh, rw), resample="area")
        if h % rh == 0 and w % rw == 0:
            cov = ms.reshape(rh, h // rh, rw, w // rw, 4).mean(axis=(1, 3))
            want = np.asfortranarray((cov >= 0.5).astype(np.uint8))
            tap.ok(same_array(area, want), "decode size=(%d, %d) area = block mean >= 1/2" % (rh, rw))
        else:
            tap.ok(area.shape == (rh, rw, 4) and area.dtype == np.uint8 and area.flags.f_contiguous,
                   "decode size=(%d, %d) area: shape, dtype, order" % (rh, rw))
        one = S.decode(rles[0], size=(rh, rw))
        tap.ok(same_array(one, np.asfortranarray(near[:, :, 0])) or np.array_equal(one, near[:, :, 0]),
               "decode of one object at size (%d, %d)" % (rh, rw))
    tap.raises(ValueError, lambda: S.decode(rles, size=(0, 4)), "a target size of 0 is refused")
    tap.raises(ValueError, lambda: S.decode(rles, size=(4, 4), resample="cubic"), "an unknown resample")
    tap.raises(ValueError, lambda: S.decode([]), "decode of nothing")


def check_hostile():
    """random strings and sizes: a result or ValueError, never a crash (the
    suite runs this under ASan too)"""
    rng = np.random.default_rng(99)
    outcomes = set()
    for _ in range(3000):
        n = int(rng.integers(0, 24))
        counts = bytes(rng.integers(40, 120, n, dtype=np.uint8))
        h, w = int(rng.integers(0, 9)), int(rng.integers(0, 9))
        rle = {"size": [h, w], "counts": counts}
        try:
            m = S.decode(rle)
            S.area([rle]), S.toBbox([rle]), S.merge([rle, rle]), S.iou([rle], [rle], [0])
            S.decode(rle, size=(3, 2), resample="area")
            outcomes.add("ok" if S.encode(np.asfortranarray(m))["size"] == [h, w] else "bad")
        except ValueError:
            outcomes.add("ValueError")
    tap.ok(outcomes == {"ok", "ValueError"}, "3000 random strings: valid ones decode, the rest raise ValueError",
           outcomes)


def check_reentrant():
    """Python code run while a list is read (a size's __getitem__, a
    mapping's, a run's __index__) that empties the list: every object is
    still read (before: the extension read the list's freed storage and
    crashed)"""
    r = S.encode(np.asfortranarray(np.eye(4, dtype=np.uint8)))
    objs = []

    class Size(list):
        def __getitem__(self, i):
            objs.clear()
            return list.__getitem__(self, i)

    def emptied(n):
        objs[:] = [{"size": Size(r["size"]), "counts": r["counts"]} for _ in range(n)]
        return objs
    tap.eq(S.decode(emptied(40)).shape, (4, 4, 40), "decode: a list emptied by its objects' size")
    tap.eq(len(S.area(emptied(40))), 40, "area: the same")
    tap.eq(S.toBbox(emptied(40)).shape, (40, 4), "toBbox: the same")
    tap.eq(S.merge(emptied(40)), r, "merge: the same")
    tap.eq(S.iou(emptied(30), [r, r], [0, 1]).shape, (30, 2), "iou: the same")
    unc = {"size": [4, 4], "counts": [3, 5, 8]}
    want = S.frPyObjects(unc, 4, 4)

    class Emptying(dict):
        def __getitem__(self, key):
            objs.clear()
            return dict.__getitem__(self, key)
    objs[:] = [Emptying(unc) for _ in range(20)]
    tap.eq(S.frUncompressedRLE(objs, 4, 4), [want] * 20, "frUncompressedRLE: a list emptied by its mappings")
    runs = []

    class Run:
        def __index__(self):
            runs.clear()
            return 3
    runs[:] = [Run(), 5, 8]
    tap.eq(S.frPyObjects({"size": [4, 4], "counts": runs}, 4, 4), want,
           "frUncompressedRLE: runs emptied by a run's __index__")


def check_bounds():
    # an empty [2^32, 0, 1] mask: its size wrapped to [0, 0]
    tap.raises(ValueError, lambda: S.encode(np.zeros((2 ** 32, 0, 1), np.uint8, order="F")),
               "encode: a side beyond 2^32-1 (no pixels) is refused, not wrapped", match="4294967296x0")
    # bool masks, as pycocotools takes them (before: ValueError "got '?'")
    m = random_masks(np.random.default_rng(8), 9, 7, 3).astype(bool)
    tap.eq(S.encode(m), S.encode(m.astype(np.uint8)), "encode of a bool [h, w, n] mask")
    tap.eq(S.encode(m[:, :, 1]), S.encode(m[:, :, 1].astype(np.uint8)), "encode of a bool [h, w] mask")
    if P is not None:
        agree(lambda M: M.encode(m), "encode of a bool mask as pycocotools")
    tap.raises(ValueError, lambda: S.encode(m.astype(np.int8)), "an int8 mask is refused as by pycocotools",
               match="dtype")
    # the codec's message already names the call
    try:
        S.merge([{"size": [2, 2], "counts": b"13"}, {"size": [1, 4], "counts": b"04"}])
        msg = None
    except ValueError as e:
        msg = str(e)
    tap.ok(msg is not None and msg.startswith("merge: mask 1") and "merge: merge" not in msg,
           "merge of different sizes: one 'merge:' in the message", msg)
    # a polygon on a grid of more than 2^31 pixels: pycocotools' int
    # arithmetic overflowed there (undefined behaviour: UBSan stopped the
    # test); the runs are its runs modulo 2^32
    big = [[59000, 100, 59010, 100, 59010, 110, 59000, 110]]
    got = S.frPyObjects(big, 60000, 60000)
    tap.eq(got, [{"size": [60000, 60000], "counts": b"T[WP`Y3:fbj100000000000000000lfgdh1"}],
           "frPyObjects: a square at x = 59000 of a 60000 x 60000 mask")
    if P is not None:
        tap.eq(got, P.frPyObjects(big, 60000, 60000), "and pycocotools gives the same")
    # coordinates the 5x fine grid's int cannot hold: pycocotools' undefined
    # behaviour, here a boundary of ~2^31 points (17 GB of memory, minutes);
    # run in a child limited to 4 GiB (not under ASan, which needs more
    # address space), so that a regression is a MemoryError, not the machine
    code = r"""
import os, resource, sys
if "libasan" not in os.environ.get("LD_PRELOAD", ""):
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
import sa1b.mask as S
import numpy as np
nan = float("nan")
for poly in ([nan, 0, 5, 5, 10, 0], [0, 0, 5, float("inf"), 10, 0], [1e9, 0, 5, 5, 10, 0],
             [-4e8, 0, 4e8, 0, 4e8, 5], [0, -4e8, 0, 4e8, 5, 5]):
    try:
        S.frPyObjects([poly], 10, 10)
        print("ok")
    except Exception as e:
        print(type(e).__name__, str(e).replace("\n", " "))
try:
    S.frPyObjects(np.array([[nan, 0, 3, 3]]), 10, 10)
    print("ok")
except Exception as e:
    print(type(e).__name__, e)
"""
    import subprocess
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    lines = run.stdout.splitlines()
    tap.ok(run.returncode == 0 and len(lines) == 6 and all(line.startswith("ValueError") for line in lines),
           "polygons and boxes with NaN, inf, |c| > 4.29e8 or an edge of 2^31 fine steps: ValueError",
           run.stdout + run.stderr[-2000:])
    tap.ok("coordinate 0 (nan)" in run.stdout and "edge 0" in run.stdout, "the message names the coordinate or edge",
           run.stdout)


if __name__ == "__main__":
    check_reference()
    check_real()
    check_extensions()
    check_hostile()
    check_reentrant()
    check_bounds()
    tap.done()
