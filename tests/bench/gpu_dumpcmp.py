#!/usr/bin/env python3
"""gpu_dumpcmp.py A B [--tol-loss X] [--tol-grad Y] - compares two
`sa1b-train --dump-step` files of the same batch and parameters (the CUDA
backend's against the CPU backend's, for scripts/gpu-check verify):

  inputs (in.*) and parameters:   byte for byte (the same step was dumped)
  out.loss, out.focal, ...:        |a - b| / max(|b|, 1e-12)         <= tol-loss
  out.logits, out.iou, grad.*:     ||a - b|| / max(||b||, floor)     <= tol-grad
      floor = 1e-3 * ||all gradients of B|| / sqrt(#gradients), as in
      tests/reference/sam_ref.py: a tensor whose exact gradient is zero
      is judged against the scale of the model's gradients.

Prints one line per failure and a last line "worst ... " with the largest
relative errors; exit 0 within tolerance, 1 a mismatch, 2 unreadable."""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_tensors import tensors  # noqa: E402

NP = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "U8": np.uint8}


def arrays(path):
    out = {}
    for k, (dt, shape, raw) in tensors(path).items():
        if dt not in NP:
            raise ValueError("tensor %s has dtype %s" % (k, dt))
        out[k] = (raw, np.frombuffer(raw, dtype=NP[dt]).astype(np.float64).reshape(shape))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tol-loss", type=float, default=1e-5)
    ap.add_argument("--tol-grad", type=float, default=1e-4)
    o = ap.parse_args()
    try:
        a, b = arrays(o.a), arrays(o.b)
    except (OSError, ValueError, KeyError) as e:
        print("gpu_dumpcmp: unreadable: %s" % e)
        return 2
    fails = []
    if sorted(a) != sorted(b):
        fails.append("tensor names differ: only in A %s, only in B %s" % (
            sorted(set(a) - set(b))[:3], sorted(set(b) - set(a))[:3]))
    names = [k for k in a if k in b]
    grads = [k for k in names if k.startswith("grad.")]
    total = math.sqrt(sum(float(np.sum(b[k][1] ** 2)) for k in grads))
    floor = 1e-3 * total / math.sqrt(max(len(grads), 1))
    worst = {"loss": (0.0, ""), "grad": (0.0, ""), "out": (0.0, "")}
    for k in names:
        (ra, xa), (rb, xb) = a[k], b[k]
        if xa.shape != xb.shape:
            fails.append("%s: shape %s vs %s" % (k, xa.shape, xb.shape))
            continue
        if not (k.startswith("out.") or k.startswith("grad.")):
            if ra != rb:
                fails.append("%s differs (inputs and parameters must be the same bytes)" % k)
            continue
        if not np.all(np.isfinite(xa)):
            fails.append("%s: not finite in A" % k)
            continue
        if xa.size == 1 and k.startswith("out."):
            e, tol, cls = abs(float(xa.flat[0] - xb.flat[0])) / max(abs(float(xb.flat[0])), 1e-12), o.tol_loss, "loss"
        else:
            fl = floor if k.startswith("grad.") else 1e-12
            e = float(np.linalg.norm(xa - xb) / max(np.linalg.norm(xb), fl))
            tol, cls = o.tol_grad, ("grad" if k.startswith("grad.") else "out")
        if e > worst[cls][0] or not worst[cls][1]:
            worst[cls] = (e, k)
        if not e <= tol:
            fails.append("%s: relative error %.3e > %.0e" % (k, e, tol))
    for f in fails:
        print("MISMATCH " + f)
    print("%s: %d tensors, %d gradients; worst: loss %.1e (%s), output %.1e (%s), gradient %.1e (%s); tol %.0e/%.0e" % (
        "FAIL" if fails else "ok", len(names), len(grads), worst["loss"][0], worst["loss"][1],
        worst["out"][0], worst["out"][1], worst["grad"][0], worst["grad"][1], o.tol_loss, o.tol_grad))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
