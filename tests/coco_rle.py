"""coco_rle.py - the COCO compressed RLE format in plain Python, written from
the format's description (not from any implementation), shared by the test
checkers and the Python baseline of the benchmarks.

runs(s)            counts string -> run lengths (ValueError when malformed)
string(runs)       run lengths -> counts string
decode(s, h, w)    counts string -> numpy uint8 array [h, w] (needs numpy)
"""


def runs(s):
    """Run lengths of a counts string: 5-bit groups as characters 48..111,
    0x20 = more groups follow, 0x10 of the last group = negative; from the
    fourth run on, the value is a delta against the run two places before."""
    out, p, n = [], 0, len(s)
    while p < n:
        x, k, more = 0, 0, True
        while more:
            if p >= n:
                raise ValueError("string ends inside a number")
            c = ord(s[p]) - 48
            if c < 0 or c > 63:
                raise ValueError("character %r outside 48..111" % s[p])
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(out) > 2:
            x += out[-2]
        out.append(x)
    return out


def string(rs):
    """The counts string of run lengths rs (the inverse of runs)."""
    out = []
    for i, x in enumerate(rs):
        if i > 2:
            x -= rs[i - 2]
        more = True
        while more:
            c = x & 0x1F
            x >>= 5
            more = (x != -1) if (c & 0x10) else (x != 0)
            if more:
                c |= 0x20
            out.append(chr(c + 48))
    return "".join(out)


def decode(s, h, w):
    """The h x w mask (numpy uint8, row-major view) of a counts string; the
    runs go down the columns."""
    import numpy as np
    rs = runs(s)
    if sum(rs) != h * w:
        raise ValueError("run sum %d != %dx%d" % (sum(rs), h, w))
    flat = np.zeros(h * w, dtype=np.uint8)
    pos, val = 0, 0
    for r in rs:
        if val:
            flat[pos:pos + r] = 1
        pos += r
        val ^= 1
    return flat.reshape(w, h).T
