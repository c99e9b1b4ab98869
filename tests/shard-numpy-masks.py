"""shard-numpy-masks.py MANPAGE TAR INSPECT_JSONL R MODE

Takes the numpy function shard_mask from the EXAMPLES of sa1b-shard(5) (the
literal display that defines it), applies it to every source mask of TAR
(its annotations' COCO RLE, decoded here) and compares the result with the
shard's mask of the same id (sa1b-inspect --masks --rle output, decoded
here).  Only the page's formulas make the masks: nothing of sa1b's code.
Exit 0 when every mask agrees, 1 with a message when not.
"""
import json
import os
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coco_rle  # noqa: E402


def extract(manpage):
    lines = open(manpage, encoding="utf-8").read().split("\n")
    start = lines.index(".Sh EXAMPLES")
    k = start
    while True:
        i = next(n for n in range(k, len(lines)) if lines[n].startswith(".Bd -literal"))
        j = lines.index(".Ed", i)
        code = "\n".join(lines[i + 1:j]).replace("\\e", "\\").replace("\\&", "")
        if "def shard_mask(" in code:
            return code
        k = j


def main():
    manpage, tar, jsonl, R, mode = sys.argv[1:6]
    R = int(R)
    env = {"__name__": "sa1b_shard_5"}
    exec(compile(extract(manpage), "sa1b-shard.5 EXAMPLES", "exec"), env)
    shard_mask = env["shard_mask"]
    src = {}
    with tarfile.open(tar) as t:
        for m in t.getmembers():
            if m.name.endswith(".json"):
                d = json.load(t.extractfile(m))
                W, H = d["image"]["width"], d["image"]["height"]
                for a in d["annotations"]:
                    seg = a["segmentation"]
                    assert seg["size"] == [H, W], (seg["size"], W, H)
                    src[a["id"]] = (seg["counts"], H, W)
    n = bits = 0
    for line in open(jsonl, encoding="utf-8"):
        o = json.loads(line)
        if o["type"] == "shard":
            got_mode = o["provenance"]["options"]["mask_resample"]
            if got_mode != mode or o["mask_size"] != R:
                print("the shard says %s R=%d, not %s R=%d" % (got_mode, o["mask_size"], mode, R))
                return 1
        if o["type"] != "mask":
            continue
        counts, H, W = src[o["id"]]
        want = shard_mask(coco_rle.decode(counts, H, W), R, mode)
        got = coco_rle.decode(o["mask_rle"]["counts"], R, R)
        if want.shape != (R, R) or (want != got).any():
            bad = (want != got).nonzero()
            print("mask %d (image %d, %dx%d): %d cells differ, first at row %d, column %d" % (
                o["id"], o["image_id"], W, H, len(bad[0]), bad[0][0], bad[1][0]))
            return 1
        n += 1
        bits += int(got.sum())
    if n == 0:
        print("no mask in the shard")
        return 1
    print("%d masks agree (%d set cells)" % (n, bits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
