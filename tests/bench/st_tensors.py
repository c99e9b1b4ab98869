#!/usr/bin/env python3
"""st_tensors.py A B - compares the tensors of two safetensors files (the
trainer's checkpoints and state files) byte for byte, ignoring the metadata
(which may change between versions).  Prints one line; exit 0 when every
tensor of A is in B with the same dtype, shape and bytes and B has no other,
1 otherwise, 2 on an unreadable file."""
import json
import struct
import sys


def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    head.pop("__metadata__", None)
    return {k: (v["dtype"], tuple(v["shape"]), data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in head.items()}


def main():
    try:
        a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
    except (OSError, ValueError, KeyError, struct.error) as e:
        print(f"unreadable: {e}")
        return 2
    diff = [k for k in a if k not in b or a[k] != b[k]] + [k for k in b if k not in a]
    nbytes = sum(len(v[2]) for v in a.values())
    if diff:
        print(f"DIFFER: {len(diff)} of {len(a)} tensors (first: {diff[0]})")
        return 1
    print(f"identical: {len(a)} tensors, {nbytes} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
