#!/usr/bin/env python3
"""gpu_torch.py - the PyTorch side of `scripts/gpu-check bench`; each
command prints one JSON line.

  gemm [--n 8192] [--device cuda]
      the device's bf16 and fp32 GEMM rates: torch.matmul n x n x n on
      random data, 3 warm-ups, then 10 products timed with CUDA events;
      the median, in FLOP/s (the denominator of the trainer's MFU)
  flops DUMP
      the model FLOPs of one training step for the configuration, batch,
      masks and points of a `sa1b-train --dump-step` file: the formula of
      tr_model_flops() in trainer/model/model_seq.c (multiply-adds of the forward
      pass, x2 FLOPs, x3 for forward + backward)
  peer DUMP [--device cuda|cpu] [--steps N] [--precision bf16|fp32] [--no-compile]
      the project's PyTorch reference model (tests/reference/sam_ref.py) run
      as a PyTorch user would train it, from the dump's parameters and
      batch: bf16 autocast, F.scaled_dot_product_attention, torch.compile
      of the model, fused AdamW; a warm-up of 3 steps (compilation
      included), then N timed steps (forward, loss, backward, optimizer):
      median step seconds, images/s, peak allocated bytes
      (torch.cuda.max_memory_allocated over the timed steps; on the CPU
      the process's peak RSS), and what of the recipe was available.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))


def dump_shapes(path):
    sys.path.insert(0, HERE)
    from st_tensors import tensors
    import struct
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        meta = json.loads(f.read(n)).get("__metadata__", {})
    t = tensors(path)
    B, M, K, _ = t["in.points"][1]
    return {k: int(meta[k]) for k in ("S", "P", "E", "L", "H", "C", "h", "D")}, int(B), int(M), int(K)


def model_flops(c, B, M, K):
    """tr_model_flops() of trainer/model/model_seq.c, term by term."""
    G = c["S"] // c["P"]
    GG, E, C, NP, T = G * G, c["E"], c["C"], B * M, K + 2
    R = 4 * G
    RR, PP3 = R * R, 3.0 * c["P"] * c["P"]
    f = B * GG * PP3 * E
    f += c["L"] * B * (GG * E * (3 * E + E + 8 * E) + 2 * GG * GG * E)
    f += B * GG * E * C
    ci = C / 2
    sa = NP * (T * C * 3 * C + T * C * C + 2 * T * T * C)
    cross = NP * (T * C * ci + 2 * GG * C * ci + T * ci * C + 2 * T * GG * ci)
    f += c["D"] * (sa + 2 * cross + NP * T * 16 * C * C) + cross
    f += NP * (GG * C * C + 4 * GG * (C / 4) * (C / 2) + RR * C / 8)
    f += NP * (5 * C * C)
    return 2.0 * 3.0 * f


def cmd_flops(a):
    c, B, M, K = dump_shapes(a.dump)
    print(json.dumps({"flops_per_step": model_flops(c, B, M, K), "batch": B, "masks": M, "points": K, **c}))
    return 0


def cmd_gemm(a):
    import torch
    if a.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device visible to torch"}))
        return 1
    out = {"device": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu", "n": a.n}
    torch.backends.cuda.matmul.allow_tf32 = False
    for name, dt in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        g = torch.Generator(device=a.device).manual_seed(1)
        x = torch.randn(a.n, a.n, device=a.device, dtype=dt, generator=g)
        y = torch.randn(a.n, a.n, device=a.device, dtype=dt, generator=g)
        times = []
        for i in range(3 + a.reps):
            if a.device == "cuda":
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                torch.matmul(x, y)
                e1.record()
                torch.cuda.synchronize()
                dt_s = e0.elapsed_time(e1) / 1e3
            else:
                t0 = time.perf_counter()
                torch.matmul(x, y)
                dt_s = time.perf_counter() - t0
            if i >= 3:
                times.append(dt_s)
        out[name + "_flops"] = 2.0 * a.n ** 3 / statistics.median(times)
        del x, y
    print(json.dumps(out))
    return 0


def cmd_peer(a):
    import numpy as np
    import torch
    import torch.nn.functional as F
    import sam_ref

    dev = a.device
    if dev == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device visible to torch"}))
        return 1
    t, meta = sam_ref.load_safetensors(a.dump)
    have_sdpa = hasattr(F, "scaled_dot_product_attention")
    have_compile = hasattr(torch, "compile") and not a.no_compile

    class Peer(sam_ref.Model):
        def mha(self, q, k, v, h):
            if have_sdpa:
                return F.scaled_dot_product_attention(q, k, v)
            return super().mha(q, k, v, h)

    # the model's tensors on the device they name, not through
    # torch.set_default_device: torch.compile (2.11, CUDA) failed under that
    # mode ("RuntimeError when making fake tensor call", 2026-11-28, H200)
    mdl = Peer(t, meta, torch.float32, device=dev)
    params = [p for p in mdl.p.values() if p.requires_grad]

    def inp(name, dtype):
        return torch.tensor(np.array(t[name]).astype(np.float32 if dtype.is_floating_point else np.int64),
                            dtype=dtype, device=dev)

    image, points = inp("in.image", torch.float32), inp("in.points", torch.float32)
    labels, masks, valid = inp("in.labels", torch.int64), torch.tensor(np.array(t["in.masks"]), device=dev), \
        torch.tensor(np.array(t["in.valid"]), device=dev)
    B = image.shape[0]
    try:
        opt = torch.optim.AdamW(params, lr=1e-4, fused=(dev == "cuda"))
        fused = dev == "cuda"
    except (TypeError, RuntimeError):
        opt, fused = torch.optim.AdamW(params, lr=1e-4), False
    fwd = torch.compile(mdl.forward) if have_compile else mdl.forward
    bf16 = a.precision == "bf16"

    def step():
        with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=bf16):
            logits, iou = fwd(image, points, labels)
        loss = sam_ref.sam_loss(logits.float(), iou.float(), masks, valid)[0]
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    def sync():
        if dev == "cuda":
            torch.cuda.synchronize()

    def warm_up():
        for _ in range(3):
            step()
        sync()

    def first_line(e):
        return (str(e).splitlines() or [type(e).__name__])[0]

    compile_error = None

    def failed(e):  # the traceback in the log, the reason as the last line
        traceback.print_exc()
        out = {"error": "%s step failed: %s" % (a.precision, first_line(e)), "torch": torch.__version__, "device": dev}
        if compile_error is not None:
            out["compile_error"] = compile_error
        print(json.dumps(out))
        return 1

    t0 = time.perf_counter()
    try:
        warm_up()
    except Exception as e:  # a compiler failure: the traceback in the log, the peer run eagerly
        if not have_compile:
            return failed(e)
        traceback.print_exc()
        compile_error = first_line(e)[:200]
        opt.zero_grad(set_to_none=True)
        fwd, have_compile = mdl.forward, False
        try:
            warm_up()
        except RuntimeError as e2:  # e.g. torch 1.13's CPU autocast refuses a bf16 layer_norm
            return failed(e2)
    warm = time.perf_counter() - t0
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(a.steps):
        t1 = time.perf_counter()
        loss = step()
        sync()
        times.append(time.perf_counter() - t1)
    st = statistics.median(times)
    peak = torch.cuda.max_memory_allocated() if dev == "cuda" else \
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"step_s": st, "images_per_s": B / st, "peak_bytes": peak, "batch": B,
                      "loss": float(loss), "warmup_s": warm, "steps": a.steps, "torch": torch.__version__,
                      "precision": a.precision, "sdpa": have_sdpa, "compiled": have_compile,
                      "fused_adamw": fused, "device": dev, "compile_error": compile_error}))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gemm")
    g.add_argument("--n", type=int, default=8192)
    g.add_argument("--reps", type=int, default=10)
    g.add_argument("--device", default="cuda")
    f = sub.add_parser("flops")
    f.add_argument("dump")
    p = sub.add_parser("peer")
    p.add_argument("dump")
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    return {"gemm": cmd_gemm, "flops": cmd_flops, "peer": cmd_peer}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
