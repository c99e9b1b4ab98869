"""shard-numpy-check.py MANPAGE SHARD INSPECT_JSONL

Extracts the numpy reader from the EXAMPLES section of sa1b-shard(5) (the
first literal display after .Sh EXAMPLES), runs it on SHARD, and compares
its output (image_id, id, area, bit count per mask) with sa1b-inspect --rle
output, whose COCO RLE strings are decoded here independently.  Exit 0 when
they agree, 1 with a message when not.
"""
import contextlib
import io
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coco_rle  # noqa: E402


def extract(manpage):
    lines = open(manpage, encoding="utf-8").read().split("\n")
    start = lines.index(".Sh EXAMPLES")
    i = next(k for k in range(start, len(lines)) if lines[k].startswith(".Bd -literal"))
    j = lines.index(".Ed", i)
    code = "\n".join(lines[i + 1:j])
    return code.replace("\\e", "\\").replace("\\&", "")


def rle_pixels(counts):
    """Foreground pixels of a COCO compressed RLE string."""
    return sum(coco_rle.runs(counts)[1::2])


def main():
    manpage, shard, jsonl = sys.argv[1:4]
    code = extract(manpage)
    out = io.StringIO()
    sys.argv = ["reader", shard]
    with contextlib.redirect_stdout(out):
        exec(compile(code, "sa1b-shard.5 EXAMPLES", "exec"), {"__name__": "__main__"})
    got = [line.split() for line in out.getvalue().splitlines()]
    want = []
    for line in open(jsonl, encoding="utf-8"):
        o = json.loads(line)
        if o["type"] == "mask":
            want.append((o["image_id"], o["id"], o["area"], rle_pixels(o["mask_rle"]["counts"])))
    if len(got) != len(want):
        print("numpy reader printed %d masks, sa1b-inspect %d" % (len(got), len(want)))
        return 1
    for g, w in zip(got, want):
        if (int(g[0]), int(g[1]), int(g[3])) != (w[0], w[1], w[3]) or abs(float(g[2]) - w[2]) > 1e-3 * max(1, abs(w[2])):
            print("mismatch: numpy %s, inspect %s" % (g, w))
            return 1
    print("%d masks agree (%d set bits)" % (len(want), sum(w[3] for w in want)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
