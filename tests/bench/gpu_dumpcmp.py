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

With --ref R (the 16-bit checks: A the CUDA backend's bf16 or fp16 dump, B
the CPU backend's in the same precision, R the CPU backend's fp32 dump of
the same step) each of those errors is taken against R, and A passes where

  e(A, R) <= factor * max(e(B, R), min-err)        (3 and 1e-3 by default)

per tensor and over all gradients together: the GPU is held to the CPU's
own distance from fp32, not to the CPU's rounding.  Two correct 16-bit
implementations that sum in another order (cuBLAS against OpenBLAS), or
that keep the attention probabilities in fp32 where the CPU rounds them,
differ from each other by up to 10% on single gradients of the small
model, about as far as each is from fp32; measured on the CPU with both
changes emulated, the worst ratio was 2.1 (bf16) and 2.5 (fp16).

Prints one line per failure and a last line "worst ... " with the largest
relative errors (or ratios); exit 0 within tolerance, 1 a mismatch, 2
unreadable."""
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


def rel_errors(a, b, names):
    """{name: relative error of a against b} for the outputs and gradients
    (the rules above), and "grad.*": all gradients together."""
    grads = [k for k in names if k.startswith("grad.")]
    total = math.sqrt(sum(float(np.sum(b[k][1] ** 2)) for k in grads))
    floor = 1e-3 * total / math.sqrt(max(len(grads), 1))
    out, diff2 = {}, 0.0
    for k in names:
        xa, xb = a[k][1], b[k][1]
        if not (k.startswith("out.") or k.startswith("grad.")) or xa.shape != xb.shape:
            continue
        if not np.all(np.isfinite(xa)):
            out[k] = math.inf
            continue
        if xa.size == 1 and k.startswith("out."):
            out[k] = abs(float(xa.flat[0] - xb.flat[0])) / max(abs(float(xb.flat[0])), 1e-12)
        else:
            fl = floor if k.startswith("grad.") else 1e-12
            out[k] = float(np.linalg.norm(xa - xb) / max(np.linalg.norm(xb), fl))
        if k.startswith("grad."):
            diff2 += float(np.sum((xa - xb) ** 2))
    out["grad.*"] = math.sqrt(diff2) / max(total, 1e-30)
    return out


def cls_of(k, x):
    if k.startswith("grad."):
        return "grad"
    return "loss" if x.size == 1 else "out"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tol-loss", type=float, default=1e-5)
    ap.add_argument("--tol-grad", type=float, default=1e-4)
    ap.add_argument("--ref", help="fp32 dump both A and B are judged against")
    ap.add_argument("--factor", type=float, default=3.0)
    ap.add_argument("--min-err", type=float, default=1e-3)
    o = ap.parse_args()
    try:
        a, b = arrays(o.a), arrays(o.b)
        r = arrays(o.ref) if o.ref else None
    except (OSError, ValueError, KeyError) as e:
        print("gpu_dumpcmp: unreadable: %s" % e)
        return 2
    fails = []
    for other, what in ((b, "B"),) + (((r, "the reference"),) if r is not None else ()):
        if sorted(a) != sorted(other):
            fails.append("tensor names differ from %s's: only in A %s, only in %s %s" % (
                what, sorted(set(a) - set(other))[:3], what, sorted(set(other) - set(a))[:3]))
    names = [k for k in a if k in b and (r is None or k in r)]
    grads = [k for k in names if k.startswith("grad.")]
    for k in names:
        for other, what in ((b, "B"),) + (((r, "the reference"),) if r is not None else ()):
            if a[k][1].shape != other[k][1].shape:
                fails.append("%s: shape %s vs %s in %s" % (k, a[k][1].shape, other[k][1].shape, what))
            elif not (k.startswith("out.") or k.startswith("grad.")) and a[k][0] != other[k][0]:
                fails.append("%s differs from %s's (inputs and parameters must be the same bytes)" % (k, what))
    worst = {"loss": (0.0, ""), "grad": (0.0, ""), "out": (0.0, "")}
    if r is None:
        ea = rel_errors(a, b, names)
        del ea["grad.*"]
        for k, e in ea.items():
            cls = cls_of(k, a[k][1])
            tol = o.tol_loss if cls == "loss" else o.tol_grad
            if e > worst[cls][0] or not worst[cls][1]:
                worst[cls] = (e, k)
            if e == math.inf:
                fails.append("%s: not finite in A" % k)
            elif not e <= tol:
                fails.append("%s: relative error %.3e > %.0e" % (k, e, tol))
        rule = "tol %.0e/%.0e" % (o.tol_loss, o.tol_grad)
    else:
        ea, eb = rel_errors(a, r, names), rel_errors(b, r, names)
        for k, e in ea.items():
            cls = "grad" if k == "grad.*" else cls_of(k, a[k][1])
            if k not in eb or not math.isfinite(eb[k]):  # B's own error unknown: nothing to hold A to
                fails.append("%s: B's error against fp32 is %s: A cannot be judged" % (
                    k, "not finite" if k in eb else "unknown (shapes differ)"))
                continue
            tol = o.factor * max(eb[k], o.min_err)
            ratio = e / max(eb[k], o.min_err)
            if ratio > worst[cls][0] or not worst[cls][1]:
                worst[cls] = (ratio, k)
            if e == math.inf:
                fails.append("%s: not finite in A" % k)
            elif not e <= tol:
                fails.append("%s: error against fp32 %.3e > %g x %.3e (B's)" % (k, e, o.factor, max(eb[k], o.min_err)))
        rule = "(ratios: A's error against fp32 over B's, at least %g) tol %g" % (o.min_err, o.factor)
    for f in fails:
        print("MISMATCH " + f)
    print("%s: %d tensors, %d gradients; worst: loss %.1e (%s), output %.1e (%s), gradient %.1e (%s); %s" % (
        "FAIL" if fails else "ok", len(names), len(grads), worst["loss"][0], worst["loss"][1],
        worst["out"][0], worst["out"][1], worst["grad"][0], worst["grad"][1], rule))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
