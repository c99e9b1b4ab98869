#!/usr/bin/python3
"""sa1b_tamper.py - damages one SA-1B annotation file in a chosen way, for
the bad-input tests of sa1b-shard.  Usage: sa1b_tamper.py KIND FILE.json

  badchar   mask 0's counts gets a character outside 48..111
  runsum    mask 7's runs sum to h*w - 1 (a valid string otherwise)
  size      mask 3's size differs from the image size
  width     image.width is absurd (100000)
  schema    the "annotations" key is missing
  syntax    the file is cut in half (does not parse)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from coco_rle import runs as rle_runs_only, string as rle_string  # noqa: E402


kind, path = sys.argv[1], sys.argv[2]
text = open(path).read()
d = json.loads(text)
a = d["annotations"]
if kind == "badchar":
    a[0]["segmentation"]["counts"] = "~" + a[0]["segmentation"]["counts"][1:]
elif kind == "runsum":
    h, w = a[7]["segmentation"]["size"]
    runs = rle_runs_only(a[7]["segmentation"]["counts"])
    j = max(i for i, r in enumerate(runs) if r > 0)
    runs[j] -= 1
    a[7]["segmentation"]["counts"] = rle_string(runs)
elif kind == "size":
    a[3]["segmentation"]["size"][0] += 1
elif kind == "width":
    d["image"]["width"] = 100000
elif kind == "schema":
    del d["annotations"]
elif kind == "syntax":
    open(path, "w").write(text[: len(text) // 2])
    sys.exit(0)
else:
    sys.exit("unknown kind " + kind)
open(path, "w").write(json.dumps(d))
