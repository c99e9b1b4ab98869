#!/usr/bin/env python3
"""rle_golden.py - writes tests/data/rle-golden.txt, the golden vectors that
tests/test-rle-fast.c checks both string decoders of rle.c and its bbox
against.  Only needed to regenerate the file, never at test time:

    python3 tests/rle_golden.py > tests/data/rle-golden.txt
    python3 tests/rle_golden.py --check   # also against pycocotools, if installed

Independent of the library.  A string's runs come from coco_rle.runs (the
format from its description); whether it is taken, and if not the error and
offset, from the rules sa1b_rle.h documents for sa1b_rle_from_string, checked
in the order a decoder that reads from left to right meets them.  A box is
pycocotools' rleToBbox (maskApi.c) in its 32-bit unsigned arithmetic.
--check decodes the valid strings and takes the boxes with pycocotools itself
(pip install pycocotools numpy, in a virtual environment), where its 32-bit C
code is defined (values below 2^29) and, for boxes, where its rleToBbox of
2.0.8 on agrees with the one before (no zero-length foreground run), and
fails on any difference.

Deterministic: a fixed seed; the same file on every run.
"""

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coco_rle  # noqa: E402

U32 = 0xFFFFFFFF
MAX_GROUPS = 7  # 35 bits: any delta of two 32-bit runs


def value_groups(x, extra=0):
    """The characters of one value x (any sign), canonical, or spread over
    extra more groups (the non-canonical form pycocotools also reads)."""
    out = []
    while True:
        c = x & 0x1F
        x >>= 5
        more = (x != -1) if (c & 0x10) else (x != 0)
        if not more and extra:
            more, extra = True, extra - 1
        out.append(c | (0x20 if more else 0))
        if not more:
            return bytes(48 + g for g in out)


def encode(rs, extra=None):
    """The counts string of runs rs; extra[i] more groups for run i."""
    out = b""
    for i, x in enumerate(rs):
        if i > 2:
            x -= rs[i - 2]
        out += value_groups(x, extra[i] if extra else 0)
    return out


def decode_checked(s, h, w):
    """('ok', runs) or ('err', code, offset) for counts string s (bytes) of
    an h x w mask, as sa1b_rle.h says: h*w above 2^32-1 is ERANGE (offset
    -1); a byte outside 48..111 EFORMAT at its index; the string ending
    inside a value ETRUNC at the value's first character; more than 7 groups,
    a run below 0 or above 2^32-1 ERANGE at the run's index; a run sum above
    h*w EMISMATCH at the run where it passes, below it at the end (offset =
    number of runs)."""
    hw = h * w
    if hw > U32:
        return ("err", "ERANGE", -1)
    rs, p, total = [], 0, 0
    while p < len(s):
        start, k = p, 0
        while True:
            if p >= len(s):
                return ("err", "ETRUNC", start)
            g = s[p] - 48
            if g < 0 or g > 63:
                return ("err", "EFORMAT", p)
            if k == MAX_GROUPS:
                return ("err", "ERANGE", len(rs))
            p += 1
            k += 1
            if not g & 0x20:
                break
        x = coco_rle.runs(s[start:p].decode("ascii"))[0]
        if len(rs) > 2:
            x += rs[-2]
        if x < 0 or x > U32:
            return ("err", "ERANGE", len(rs))
        total += x
        if total > hw:
            return ("err", "EMISMATCH", len(rs))
        rs.append(x)
    if total != hw:
        return ("err", "EMISMATCH", len(rs))
    assert rs == coco_rle.runs(s.decode("ascii"))
    return ("ok", rs)


def coco_bbox(h, w, rs):
    """pycocotools' rleToBbox on runs rs (uint32 each), uint32 arithmetic;
    a mask of 0 rows gives zeros (where pycocotools would divide by 0)."""
    m = len(rs) // 2 * 2
    if m == 0 or h == 0:
        return (0, 0, 0, 0)
    xs, ys, xe, ye, cc, xp = w, h, 0, 0, 0, 0
    for j in range(m):
        cc = (cc + rs[j]) & U32
        t = (cc - j % 2) & U32
        y = t % h
        x = (t - y) // h
        if j % 2 == 0:
            xp = x
        elif xp < x:
            ys, ye = 0, h - 1
        xs, xe, ys, ye = min(xs, x), max(xe, x), min(ys, y), max(ye, y)
    return (xs, ys, (xe - xs + 1) & U32, (ye - ys + 1) & U32)


def quote(s):
    """s between double quotes; bytes outside 0x21..0x7e, '"' and '\\' as \\xNN."""
    return '"' + "".join(chr(b) if 0x21 <= b <= 0x7E and b not in (0x22, 0x5C) else "\\x%02x" % b
                         for b in s) + '"'


class Out:
    def __init__(self):
        self.lines = []
        self.strs = []  # (h, w, s, result) for --check
        self.boxes = []
        self.seen = set()

    def note(self, text):
        self.lines.append("# " + text)

    def string(self, h, w, s):
        if isinstance(s, str):
            s = s.encode("latin-1")
        if (h, w, s) in self.seen:
            return
        self.seen.add((h, w, s))
        res = decode_checked(s, h, w)
        if res[0] == "ok":
            rs = res[1]
            self.lines.append("str %d %d %s = %d%s" % (h, w, quote(s), len(rs),
                                                      "".join(" %d" % x for x in rs)))
        else:
            self.lines.append("str %d %d %s ! %s %d" % (h, w, quote(s), res[1], res[2]))
        self.strs.append((h, w, s, res))

    def runs(self, h, w, rs, extra=None):
        self.string(h, w, encode(rs, extra))

    def bbox(self, h, w, rs):
        bb = coco_bbox(h, w, rs)
        self.lines.append("bbox %d %d %d%s = %d %d %d %d"
                          % ((h, w, len(rs), "".join(" %d" % x for x in rs)) + bb))
        self.boxes.append((h, w, rs, bb))


def random_runs(rnd, total, nmax, zero_pct):
    """Runs summing to total: zero-length ones at zero_pct percent, long and
    short ones, at most nmax of them."""
    rs, left = [], total
    scale = total if rnd.randrange(4) == 0 else 1 + rnd.randrange(total // 8 + 2)
    while len(rs) + 1 < nmax and left > 0:
        if rnd.randrange(100) < zero_pct:
            v = 0
        else:
            v = min(left, 1 if rnd.randrange(10) == 0 else 1 + rnd.randrange(scale))
        rs.append(v)
        left -= v
    rs.append(min(left, U32))
    return rs


def strings(o, rnd):
    o.note("sizes, the empty string, single values")
    for h, w, s in [(0, 0, ""), (1, 1, ""), (0, 5, ""), (0, 5, "0"), (0, 5, "00"), (0, 5, "000"),
                    (1, 1, "01"), (1, 1, "1"), (1, 1, "10"), (1, 1, "010"), (1, 1, "0100"),
                    (2, 2, "04"), (2, 2, "4"), (2, 2, "40"), (2, 2, "013"), (2, 2, "0\x60"),
                    (2, 2, "P"), (2, 2, "PP0"), (1, 32, "P0"), (1, 32, "0P0"),
                    (1, 1024, "0P\x40"), (1, 1, "o"), (1, 1, "oooooooo")]:
        o.string(h, w, s)
    o.note("zero-length runs anywhere, and the delta rule (run i > 2 is stored as run i - run i-2)")
    for h, w, s in [(3, 3, "0000009"), (3, 3, "00000O"), (3, 3, "36?"), (3, 3, "36>"),
                    (3, 3, "1131"), (3, 3, "1130"), (3, 3, "11310"), (3, 3, "113100")]:
        o.string(h, w, s)
    for h, w, rs in [(2, 2, [0, 4]), (2, 2, [4, 0]), (2, 2, [4, 0, 0]), (2, 2, [0, 4, 0, 0]),
                     (2, 2, [0, 0, 0, 4]), (2, 2, [0, 0, 4, 0]), (2, 2, [1, 0, 0, 3]),
                     (2, 2, [1, 1, 1, 1]), (3, 4, [5, 1, 1, 5]), (3, 4, [1, 5, 5, 1]),
                     (3, 4, [1, 5, 0, 6, 0]), (3, 4, [0, 12, 0, 0, 0]),
                     (10, 10, [3, 40, 7, 30, 20]), (10, 10, [40, 3, 30, 7, 0, 20]),
                     (100, 100, [9000, 1, 1, 998]), (100, 100, [1, 9000, 998, 1])]:
        o.runs(h, w, rs)
    o.note("values of 1 to 7 groups, both signs; the 32-bit limits")
    for v in (15, 16, 511, 512, 16383, 16384, 2 ** 20, 2 ** 25 - 1, 2 ** 25, 2 ** 30, 2 ** 31,
              U32 - 1, U32):
        o.runs(1, v, [v])
        o.runs(1, v, [0, v])
        o.runs(1, v, [0, 0, v])
        if v < U32:
            o.runs(1, v + 1, [1, v])
    big = U32
    for rs in ([0, big - 2, 0, 1, 1], [big - 2, 0, 1, 0, 1], [1, big - 3, 1, 1],
               [big // 2, big // 2 + 1], [1, 1, big - 4, 1, 1], [big - 1, 1, 0, 0, 0, 0]):
        o.runs(1, big, rs)
    for h, w, s in [(1, 4294967295, "0oooooo3"), (1, 4294967295, "ooooooo3"),
                    (65536, 65535, "1ooooo3"), (65536, 65535, "0ooooo`3"),
                    (65536, 65536, "0"), (65536, 65536, ""), (4294967295, 1, "0"),
                    (4294967296 // 3, 3, "0"), (2, 2147483648, "0")]:
        o.string(h, w, s)
    o.note("a value 2^32 or negative, first three runs and deltas")
    for h, w, rs in [(1, U32, [2 ** 32]), (1, U32, [0, 2 ** 32]), (1, U32, [0, 0, 2 ** 32]),
                     (1, 2, [-1, 3]), (1, 2, [0, -1, 3]), (1, 2, [1, 1, -1]),
                     (1, U32, [0, U32, 0, 2 ** 32]), (1, U32, [1, U32 - 1, 1, -1]),
                     (1, 4, [1, 1, 1, 0, -1])]:
        o.string(h, w, b"".join(value_groups(x - (rs[i - 2] if i > 2 else 0))
                                for i, x in enumerate(rs)))
    o.note("deltas +d then -d of 1 to 7 groups: a value decoded wrong here keeps the run sum")
    for d in (5, 15, 16, 300, 511, 512, 10000, 16383, 16384, 400000, 2 ** 19, 2 ** 20, 2 ** 24,
              2 ** 25 - 1, 2 ** 25, 2 ** 29, 2 ** 30 - 1, 2 ** 30):
        a = d + 7
        lists = [[10, a, 10, a + d, 10, a, 10], [a, 10, a + d, 10, a, 10, 0],
                 [0, a, 0, a + d, 0, a + d, 0, a]]
        for b in (3, 2 ** 26):  # runs a wrong delta may take below 0 (then the slow path), or not
            lists += [[10, b, 10, b + d, 10, b, 10], [10, 3, b, 3, b + d, 3, b, 3],
                      [3, b, 3, b + d, 3, b, 3, b + d, 3, b]]
        for rs in lists:
            if sum(rs) <= U32:
                o.runs(1, sum(rs), rs)
    o.note("non-canonical: a value over more groups than it needs, up to 7 and beyond")
    for rs, extra in [([4], [1]), ([4], [6]), ([4], [7]), ([0, 4], [6, 0]), ([0, 4], [0, 6]),
                      ([1, 3], [2, 3]), ([1, 1, 1, 1], [0, 0, 0, 6]), ([1, 1, 1, 1], [0, 0, 0, 7]),
                      ([3, 0, 1], [0, 6, 0]), ([0, 4, 0, 0], [5, 4, 3, 2])]:
        o.runs(2, 2, rs, extra)
    o.runs(1, U32, [U32], [0])
    o.string(1, U32, value_groups(-1, 6))  # 7 groups of -1: valid groups, negative run
    o.string(1, 1, b"O" * 2 + b"1")
    o.note("damaged: bad bytes, cut inside a value, too many groups, sums off; "
           "the first problem wins")
    for h, w, s in [(1, 1, "/"), (1, 1, "p"), (1, 1, " "), (1, 1, "\0"), (1, 1, "\x80"),
                    (1, 1, "\xff"), (1, 1, "\x7f"), (1, 1, "0/"), (1, 1, "0p1"), (2, 2, "0`/"),
                    (2, 2, "0``p"), (2, 2, "0```"), (2, 2, "0`"), (2, 2, "``"), (2, 2, "0````"),
                    (2, 2, "0`````"), (2, 2, "0``````"), (2, 2, "0```````"), (2, 2, "0````````0"),
                    (2, 2, "5"), (2, 2, "3"), (2, 2, "05"), (2, 2, "03"), (2, 2, "5/"),
                    (2, 2, "41"), (2, 2, "4`"), (2, 2, "4/"), (2, 2, "0\x20\x60"),
                    (65536, 65536, "/"), (65536, 65536, "0`"), (65536, 65537, "5"),
                    (4294967295, 2, ""), (3, 3, "0000008"), (3, 3, "000000:"),
                    (3, 3, "1131/"), (3, 3, "113`"), (3, 3, "36?0"), (3, 3, "36?1")]:
        o.string(h, w, s)
    o.note("random masks: canonical strings, non-canonical ones, damaged copies")
    junk = b"/po0_?@O \0\x80\xff\x7fAaz`"
    for it in range(400):
        h = 1 + rnd.randrange(300 if it % 3 else 3000)
        w = 1 + rnd.randrange(300 if it % 5 else 3000)
        if it % 50 == 7:
            h, w = 65536, 65535 - rnd.randrange(3)
        nmax = 1 + rnd.randrange(40 if it % 9 else 600)
        rs = random_runs(rnd, h * w, nmax, rnd.randrange(30))
        extra = None
        if it % 4 == 1:
            extra = [rnd.randrange(7) if rnd.randrange(5) == 0 else 0 for _ in rs]
        s = encode(rs, extra)
        if decode_checked(s, h, w)[0] != "ok":  # too many groups for its value
            s = encode(rs)
        if it % 2 == 0:
            o.string(h, w, s)
            continue
        s = bytearray(s)
        p = rnd.randrange(len(s)) if s else 0
        kind = rnd.randrange(6)
        if kind == 0 and s:
            s[p] = junk[rnd.randrange(len(junk))]
        elif kind == 1 and s:
            s[p] = 48 + rnd.randrange(64)
        elif kind == 2:
            del s[p:]
        elif kind == 3 and s:
            del s[p]
        elif kind == 4:
            s[p:p] = bytes([48 + rnd.randrange(64)])
        else:
            h = 1 + rnd.randrange(h + 2)
        o.string(h, w, bytes(s))


def boxes(o, rnd):
    o.note("bbox: pycocotools' rleToBbox, its quirks on zero-length runs, odd run counts, bad sums")
    for h, w, rs in [(1, 1, [1]), (1, 1, [0, 1]), (1, 1, [0, 0, 1]), (3, 3, [9]), (3, 3, [0, 9]),
                     (3, 3, [4, 1, 4]), (3, 3, [0, 0, 0, 9]), (3, 3, [0, 0, 3, 6]),
                     (3, 3, [3, 0, 3, 0, 3]), (3, 3, [2, 0, 2, 5]), (3, 3, [3, 3, 3]),
                     (3, 3, [2, 5, 2]), (1, 7, [2, 3, 2]), (7, 1, [2, 3, 2]),
                     (5, 4, [0, 1, 18, 0, 0, 1]), (4, 5, [0, 20, 0, 0]), (2, 2, [4, 0]),
                     (2, 2, [0, 0, 0, 0, 0, 4]), (0, 5, [0, 0]), (5, 0, [0, 0]), (5, 5, []),
                     (5, 5, [25]), (5, 5, [24, 1]), (5, 5, [0, 1, 24]), (5, 5, [4, 2, 19]),
                     (5, 5, [5, 5, 15]), (5, 5, [12, 0, 13]), (5, 5, [12, 1, 0, 0, 12]),
                     (65536, 65535, [U32 - 65536]), (65536, 65535, [0, U32 - 65536]),
                     (65536, 65535, [65535, 1, U32 - 131072]), (1, U32, [U32 - 1, 1]),
                     (U32, 1, [U32 - 1, 1]), (U32, 1, [0, 1, U32 - 1]),
                     (3, 3, [U32, 5, 2]), (3, 3, [U32, 1, 1, 1]), (3, 3, [5, U32, 3, 4])]:
        o.bbox(h, w, rs)
    for it in range(300):
        kind = it % 6
        if kind == 0:
            h, w = 1, 1 + rnd.randrange(300)
        elif kind == 1:
            h, w = 1 + rnd.randrange(300), 1
        elif kind == 2:
            h, w = 1 + rnd.randrange(8), 1 + rnd.randrange(8)
        elif kind == 3:
            h, w = 1 + rnd.randrange(60000), 1 + rnd.randrange(60000)
        elif kind == 4:
            h = 65536 if it % 4 == 0 else 1 + rnd.randrange(U32)
            w = max(1, U32 // h)
        else:
            h, w = 1 + rnd.randrange(100), 1 + rnd.randrange(100)
        if h * w > U32:
            w = U32 // h
        if it % 5 == 4:  # not valid: runs of any size, sums past h*w and 2^32
            rs = []
            for _ in range(1 + rnd.randrange(24)):
                k = rnd.randrange(5)
                rs.append([0, rnd.randrange(2 ** 32), 1 + rnd.randrange(h),
                           h - rnd.randrange(min(2, h)),
                           rnd.randrange(3) * h + rnd.randrange(3)][k] & U32)
        else:
            z = 0 if it % 4 == 0 else rnd.randrange(60)
            rs = random_runs(rnd, h * w, 1 + rnd.randrange(30), z)
            if len(rs) > 1 and rnd.randrange(2):
                rs = rs[:-1]
        o.bbox(h, w, rs)


def check_pycocotools(o):
    """Decodes the valid strings and takes the boxes with pycocotools."""
    import numpy as np
    from pycocotools import mask as cm
    bad = n_s = n_b = 0
    for h, w, s, res in o.strs:
        if res[0] != "ok" or h * w > 4_000_000 or h == 0 or w == 0:
            continue
        if any(abs(x) >= 2 ** 29 for x in coco_rle.runs(s.decode("ascii"))):
            continue  # maskApi.c shifts an int by 30: undefined
        n_s += 1
        want = coco_rle.decode(s.decode("ascii"), h, w)
        got = cm.decode({"size": [h, w], "counts": s})
        area = int(cm.area({"size": [h, w], "counts": s}))
        if not np.array_equal(want, got) or area != sum(res[1][1::2]):
            bad += 1
            print("differs: str %d %d %s" % (h, w, quote(s)), file=sys.stderr)
    for h, w, rs, bb in o.boxes:
        # pycocotools 2.0.8 on skips zero-length foreground runs, which the
        # quirks of the rleToBbox before (the library's) do not; its string
        # buffer holds 6 characters a run
        deltas = [x - (rs[i - 2] if i > 2 else 0) for i, x in enumerate(rs)]
        if h == 0 or not rs or sum(rs) > U32 or any(abs(d) >= 2 ** 24 for d in deltas) or \
                0 in rs[1:len(rs) // 2 * 2:2]:
            continue
        n_b += 1
        r = cm.frPyObjects([{"size": [h, w], "counts": rs}], h, w)[0]
        got = tuple(int(v) for v in cm.toBbox(r))
        if got != bb:
            bad += 1
            print("differs: bbox %d %d %r: %r, want %r" % (h, w, rs, got, bb), file=sys.stderr)
    print("pycocotools: %d strings, %d boxes, %d differ" % (n_s, n_b, bad), file=sys.stderr)
    return bad == 0


def main():
    rnd = random.Random(20240521)
    o = Out()
    strings(o, rnd)
    boxes(o, rnd)
    if "--check" in sys.argv[1:]:
        sys.exit(0 if check_pycocotools(o) else 1)
    print("# rle-golden.txt - golden vectors of tests/test-rle-fast.c, written by")
    print("# tests/rle_golden.py (regenerate, do not edit).  One a line:")
    print("#   str H W \"COUNTS\" = N R0 .. R(N-1)   the string decodes to these N runs")
    print("#   str H W \"COUNTS\" ! CODE OFFSET       it is rejected: SA1B_<CODE>, err->offset")
    print("#   bbox H W N R0 .. R(N-1) = X Y W H    sa1b_rle_bbox (pycocotools' rleToBbox)")
    print("# COUNTS: bytes 0x21..0x7e as they are, but for '\"' and '\\', which, like all")
    print("# others, are written \\xNN.")
    for line in o.lines:
        print(line)


if __name__ == "__main__":
    main()
