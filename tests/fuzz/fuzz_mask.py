"""fuzz_mask.py - fuzz harness of the Python extension's arguments (sa1b.mask
over sa1b._sa1b): RLE dicts (sizes and counts as str or bytes), uncompressed
counts, polygons, boxes and arrays, each built from the input's bytes.

test_one_input(data) is the one-input function: it needs nothing but the
extension and numpy, so that tests/t1887 replays the corpus
(tests/fuzz/corpus/python) in every build (python3 fuzz_mask.py --replay
DIR|FILE...: one TAP line per input); run as a program with atheris
installed, it fuzzes (python3 fuzz_mask.py [libFuzzer flags] [CORPUS...]).

The first byte picks what is built, the rest are its parameters.  A
malformed argument must raise one of the exceptions pycocotools' interface
raises (ValueError, TypeError, OverflowError, KeyError, IndexError,
AssertionError, Exception for its type checks) with a message of one line;
what is accepted must hold together (an area within h*w, a decoded mask
that encodes back to the same runs).  Anything else (a crash, a sanitizer
report, MemoryError for the small sizes built here, another exception)
is a finding.
"""
import math
import struct
import sys

import numpy as np

if __name__ == "__main__" and sys.argv[1:2] != ["--replay"]:
    import atheris
    # coverage of sa1b's Python side (its dispatch); the extension's C is
    # not instrumented: its crashes, sanitizer reports and wrong answers are
    # what is looked for
    with atheris.instrument_imports(include=["sa1b"]):
        import sa1b.mask as M
else:
    import sa1b.mask as M

# the largest mask decoded to pixels here (sizes beyond it are parsed only)
MAX_PIXELS = 1 << 18


class Bytes:
    """The input read front to back; past its end every read gives zeros."""

    def __init__(self, data):
        self.d = data
        self.p = 0

    def u8(self):
        if self.p >= len(self.d):
            return 0
        self.p += 1
        return self.d[self.p - 1]

    def take(self, n):
        s = self.d[self.p:self.p + n]
        self.p += len(s)
        return s + b"\0" * (n - len(s))

    def rest(self):
        s = self.d[self.p:]
        self.p = len(self.d)
        return s

    def side(self):
        """A mask side: mostly small, sometimes 0, huge, negative or not an int."""
        k = self.u8()
        kind = k >> 5
        if kind <= 3:
            return k & 31
        if kind == 4:
            return struct.unpack("<H", self.take(2))[0]
        if kind == 5:
            return [0, 1 << 32, (1 << 32) - 1, 1 << 31, 1 << 64, 65536][k % 6]
        if kind == 6:
            return -(k & 31) - 1
        return [1.5, "3", None, True, np.int64(7), np.uint8(4), float("nan"), [2]][k & 7]

    def count(self):
        k = self.u8()
        if k < 200:
            return k % 40
        return [-1, 1 << 32, (1 << 32) - 1, 1 << 64, 2.0, "1", None, np.int32(3),
                np.uint64(5), -(1 << 63)][k % 10]

    def double(self):
        k = self.u8()
        if k < 128:
            return float(k % 40) - 4 + (k >> 6) * 0.5
        if k < 160:
            return [float("nan"), float("inf"), -float("inf"), 4.3e8, -4.3e8, 1e300, -0.0,
                    4.29e8, 2.2e-308, 1e6][k % 10]
        return struct.unpack("<d", self.take(8))[0]


def clamp(c, lim=5e4):
    """c within +-lim where it is a number the rasteriser takes."""
    return max(-lim, min(lim, c)) if math.isfinite(c) and abs(c) < 1e9 else c


def one_line(e):
    msg = str(e)
    for c in msg:
        if ord(c) < 32 or ord(c) == 127:
            raise AssertionError("message of %r is not one line: %r" % (type(e).__name__, msg))


# pycocotools' own checks raise plain Exception; these are the rest
CLEAN = (ValueError, TypeError, OverflowError, KeyError, IndexError)


def rle_dict(b):
    h, w = b.side(), b.side()
    k = b.u8()
    n = k & 63
    raw = b.take(n)
    if k & 64:
        # a valid string for h x w where the sizes allow it
        if isinstance(h, int) and isinstance(w, int) and 0 <= h * w <= MAX_PIXELS and 0 <= h and 0 <= w:
            m = np.frombuffer((raw * (1 + (h * w) // max(1, n)))[:h * w] or b"", dtype=np.uint8)
            m = (m.reshape((h, w), order="F") & 1).astype(np.uint8) if h * w else np.zeros((h, w), np.uint8)
            counts = M.encode(np.asfortranarray(m))["counts"]
        else:
            counts = raw
    else:
        counts = raw
    form = k >> 7
    d = {"size": [h, w], "counts": counts.decode("latin-1") if form else counts}
    if b.u8() & 1 == 0:
        # sometimes a bad shape of dict: a size of one, three or a string
        j = b.u8() % 5
        if j == 0:
            d["size"] = [h]
        elif j == 1:
            d["size"] = [h, w, 1]
        elif j == 2:
            del d["counts"]
        elif j == 3:
            d["counts"] = [1, 2]
        else:
            d["size"] = "3x4"
    return d


def check_rles(rles):
    """What is accepted holds together."""
    for r in rles:
        h, w = r["size"]
        a = int(M.area(r))
        if not 0 <= a <= h * w:
            raise AssertionError("area %d outside 0..%d" % (a, h * w))
        if h * w <= MAX_PIXELS:
            m = M.decode(r)
            if int(m.sum()) != a:
                raise AssertionError("decoded %d pixels, area %d" % (int(m.sum()), a))
            back = M.encode(np.asfortranarray(m))
            if not np.array_equal(M.decode(back), m) or int(M.area(back)) != a:
                raise AssertionError("decode/encode changed the mask")

def op_rles(b):
    rles = [rle_dict(b) for _ in range(1 + b.u8() % 3)]
    what = b.u8() % 8
    if what == 0:
        M.area(rles)
    elif what == 1:
        M.toBbox(rles)
        M.sa1b_bbox(rles)
    elif what == 2:
        ok = [r for r in rles if isinstance(r.get("size"), list) and len(r["size"]) == 2
              and all(isinstance(s, int) for s in r["size"]) and r["size"][0] * r["size"][1] <= MAX_PIXELS]
        if len(ok) == len(rles):
            M.decode(rles)
        else:
            M.area(rles)
    elif what == 3:
        rh, rw = b.side(), b.side()
        if isinstance(rh, int) and isinstance(rw, int) and rh * rw <= MAX_PIXELS:
            M.decode(rles, size=(rh, rw), resample=["nearest", "area", "cubic"][b.u8() % 3])
    elif what == 4:
        M.merge(rles, intersect=b.u8() & 1)
    elif what == 5:
        crowd = [b.u8() & 1 for _ in range(len(rles) - 1 + b.u8() % 2)]
        M.iou(rles[:1], rles, crowd)
    elif what == 6:
        check_rles(M.frPyObjects([{"size": r.get("size"), "counts": list(b.take(b.u8() % 8))}
                                  for r in rles], 0, 0))
    else:
        M.area(rles)
        check_rles(rles)


def op_uncompressed(b):
    objs = []
    for _ in range(1 + b.u8() % 3):
        h, w = b.side(), b.side()
        objs.append({"size": [h, w], "counts": [b.count() for _ in range(b.u8() % 12)]})
    out = M.frPyObjects(objs, 0, 0)
    check_rles(out if isinstance(out, list) else [out])


def op_poly(b):
    h, w = b.side(), b.side()
    polys = [[b.double() for _ in range(b.u8() % 17)] for _ in range(1 + b.u8() % 3)]
    if not all(isinstance(s, int) and 0 <= s <= 4096 for s in (h, w)):
        # a mask of up to 2^32 columns: a toggle per column and edge is the
        # answer's own size (gigabytes); coordinates kept near the origin
        polys = [[clamp(c) for c in p[:8]] for p in polys]
    out = M.frPyObjects(polys, h, w)
    check_rles(out if isinstance(out, list) else [out])


def op_boxes(b):
    h, w = b.side(), b.side()
    n = b.u8() % 5
    rows = [[b.double() for _ in range(4)] for _ in range(n)]
    if not all(isinstance(s, int) and 0 <= s <= 4096 for s in (h, w)):
        rows = [[clamp(c) for c in r] for r in rows]
    form = b.u8() % 4
    if form == 0:
        bb = np.array(rows, dtype=np.double).reshape((n, 4))
    elif form == 1:
        bb = rows
    elif form == 2:
        bb = np.array(rows, dtype=np.float32).reshape((n, 4))
    else:
        bb = np.array(rows, dtype=np.double).reshape(-1)[: 4 * n - 1 if n else 0]
    if n and b.u8() & 1:
        M.iou(bb, bb, [b.u8() & 1 for _ in range(n)])
    else:
        out = M.frPyObjects(bb, h, w)
        check_rles(out if isinstance(out, list) else [out])


def op_array(b):
    h, w, n = b.u8() % 40, b.u8() % 40, b.u8() % 4
    dt = [np.uint8, np.bool_, np.int8, np.uint16, np.float64][b.u8() % 5]
    raw = b.take(h * w * n)
    a = np.frombuffer(raw, dtype=np.uint8).astype(dt).reshape((h, w, n))
    order = b.u8() % 4
    if order == 0:
        a = np.asfortranarray(a)
    elif order == 1:
        a = np.ascontiguousarray(a)
    elif order == 2:
        a = np.asfortranarray(a)[:, ::2, :]
    else:
        a = a.reshape((h, w * n)) if n else a[:, :, 0:0]
    out = M.encode(a)
    check_rles(out if isinstance(out, list) else [out])


OPS = [op_rles, op_uncompressed, op_poly, op_boxes, op_array]


def test_one_input(data):
    b = Bytes(bytes(data))
    op = OPS[b.u8() % len(OPS)]
    try:
        op(b)
    except CLEAN as e:
        one_line(e)
    except AssertionError as e:
        # iou's own check of iscrowd's length is an assert, as pycocotools'
        if "iscrowd" not in str(e):
            raise
    except MemoryError:
        raise
    except Exception as e:  # pycocotools' type checks: plain Exception
        if type(e) is not Exception:
            raise
        one_line(e)


def replay(paths):
    """Each file of the directories (or files) through test_one_input, one
    TAP line each; a finding is its traceback and "not ok"."""
    import os
    import traceback
    files = []
    for p in paths:
        files += [os.path.join(p, f) for f in sorted(os.listdir(p)) if not f.startswith(".")] \
            if os.path.isdir(p) else [p]
    bad = 0
    for i, f in enumerate(files, 1):
        with open(f, "rb") as fh:
            data = fh.read()
        try:
            test_one_input(data)
            print("ok %d - %s" % (i, f))
        except BaseException:  # a finding, whatever it is
            bad += 1
            print("not ok %d - %s" % (i, f))
            for line in traceback.format_exc().splitlines():
                print("# " + line)
        sys.stdout.flush()
    print("1..%d" % len(files))
    return 1 if bad or not files else 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--replay":
        sys.exit(replay(sys.argv[2:]))
    # the harness's own branches guide the search too
    g = globals()
    for name in ("rle_dict", "check_rles", "op_rles", "op_uncompressed", "op_poly", "op_boxes", "op_array"):
        g[name] = atheris.instrument_func(g[name])
    g["OPS"] = [g[f.__name__] for f in OPS]
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
