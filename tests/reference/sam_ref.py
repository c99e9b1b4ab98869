#!/usr/bin/python3
"""sam_ref.py - an independent PyTorch implementation of the compact SAM of
MODEL.md.  It loads a `sa1b-train --dump-step` file (parameters, inputs,
outputs, gradients), recomputes the loss and every gradient with torch
autograd, and compares:

  loss, focal, dice, iou_mse:  |ours - ref| / max(|ref|, 1e-12)  <= --tol-loss
  each gradient tensor:        ||ours - ref|| / max(||ref||, floor) <= --tol-grad
      floor = 1e-3 * ||all reference gradients|| / sqrt(#tensors), so that a
      tensor whose exact gradient is zero (k_proj biases: softmax is
      invariant to a shift of all scores) is judged against the scale of
      the model's gradients instead of against rounding noise.

The reference runs in float64 by default (--dtype float32 to run like the
C code).  --bench N times N forward+backward steps in float32 on the dump's
batch and prints the median seconds (for tests/bench).

Exit: 0 all within tolerance, 1 a mismatch, 2 usage or a malformed file,
77 torch missing.
"""
import argparse
import json
import math
import struct
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print("1..0 # SKIP %s" % e)
    sys.exit(77)


def load_safetensors(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = buf[8 + n:]
    dt = {"F32": np.float32, "I32": np.int32, "U8": np.uint8, "F64": np.float64, "I64": np.int64}
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        a = np.frombuffer(data[b:e], dtype=dt[t["dtype"]]).reshape(t["shape"])
        out[name] = a
    return out, meta


class Model:
    """Parameters as leaf tensors, forward of MODEL.md."""

    def __init__(self, tensors, meta, dtype, device="cpu"):
        self.cfg = {k: int(meta[k]) for k in ("S", "P", "E", "L", "H", "C", "h", "D")}
        self.dtype = dtype
        self.p = {}
        for name, a in tensors.items():
            if name.startswith(("in.", "out.", "grad.")):
                continue
            t = torch.tensor(np.array(a), dtype=dtype, device=device)
            if name != "prompt.pe_gaussian":  # a buffer: no gradient
                t.requires_grad_(True)
            self.p[name] = t

    def lin(self, x, name, bias=True):
        return F.linear(x, self.p[name + ".w"], self.p[name + ".b"] if bias else None)

    def ln(self, x, name, eps):
        return F.layer_norm(x, (x.shape[-1],), self.p[name + ".w"], self.p[name + ".b"], eps)

    @staticmethod
    def heads(x, h):  # [N, T, Ci] -> [N, h, T, Ci/h]: contiguous chunks
        N, T, Ci = x.shape
        return x.view(N, T, h, Ci // h).transpose(1, 2)

    def mha(self, q, k, v, h):
        dh = q.shape[-1]
        s = q @ k.transpose(-1, -2) / math.sqrt(dh)
        return torch.softmax(s, dim=-1) @ v

    def attn(self, name, q, k, v, h):
        q = self.heads(self.lin(q, name + ".q_proj"), h)
        k = self.heads(self.lin(k, name + ".k_proj"), h)
        v = self.heads(self.lin(v, name + ".v_proj"), h)
        o = self.mha(q, k, v, h)
        N, _, Tq, dh = o.shape
        o = o.transpose(1, 2).reshape(N, Tq, h * dh)
        return self.lin(o, name + ".out_proj")

    def pe(self, u):  # u [..., 2] in [0, 1]
        Bm = self.p["prompt.pe_gaussian"]
        z = 2 * math.pi * ((2 * u - 1) @ Bm)
        return torch.cat([torch.sin(z), torch.cos(z)], dim=-1)

    def forward(self, image, points, labels):
        c, p = self.cfg, self.p
        S, P, E, L, H, C, h, D = (c[k] for k in ("S", "P", "E", "L", "H", "C", "h", "D"))
        G = S // P
        B = image.shape[0]
        # encoder
        w = p["enc.patch.w"].view(E, 3, P, P)
        x = F.conv2d(image, w, p["enc.patch.b"], stride=P)          # [B, E, G, G]
        x = x.flatten(2).transpose(1, 2) + p["enc.pos"]            # [B, GG, E]
        for i in range(L):
            pre = "enc.blocks.%d." % i
            y = self.ln(x, pre + "ln1", 1e-6)
            qkv = self.lin(y, pre + "attn.qkv")
            q, k, v = qkv.split(E, dim=-1)
            o = self.mha(self.heads(q, H), self.heads(k, H), self.heads(v, H), H)
            o = o.transpose(1, 2).reshape(B, G * G, E)
            x = x + self.lin(o, pre + "attn.proj")
            y = self.ln(x, pre + "ln2", 1e-6)
            x = x + self.lin(F.gelu(self.lin(y, pre + "mlp.fc1")), pre + "mlp.fc2")
        emb = self.ln(self.lin(x, "enc.neck", bias=False), "enc.neck_ln", 1e-6)  # [B, GG, C]
        # prompt encoder
        _, M, K, _ = points.shape
        NP = B * M
        u = (points + 0.5) / S
        ptok = self.pe(u) + p["prompt.label_emb"][labels.clamp(min=0).long()]
        pad = (labels < 0).unsqueeze(-1)
        ptok = torch.where(pad, p["prompt.not_a_point"].expand_as(ptok), ptok)
        ptok = ptok.reshape(NP, K, C)
        T0 = torch.cat([p["dec.iou_token"].expand(NP, 1, C), p["dec.mask_token"].expand(NP, 1, C), ptok], dim=1)
        r = torch.arange(G, dtype=self.dtype, device=image.device)
        gy, gx = torch.meshgrid((r + 0.5) / G, (r + 0.5) / G, indexing="ij")
        kpe = self.pe(torch.stack([gx, gy], dim=-1)).reshape(G * G, C)
        Kimg = (emb + p["prompt.no_mask"]).repeat_interleave(M, dim=0)   # [NP, GG, C]
        # two-way transformer
        T, Kx = T0, Kimg
        for l in range(D):
            pre = "dec.layers.%d." % l
            if l == 0:
                T = self.attn(pre + "self_attn", T, T, T, h)
            else:
                T = T + self.attn(pre + "self_attn", T + T0, T + T0, T, h)
            T = self.ln(T, pre + "norm1", 1e-5)
            T = T + self.attn(pre + "t2i", T + T0, Kx + kpe, Kx, h)
            T = self.ln(T, pre + "norm2", 1e-5)
            T = T + self.lin(F.relu(self.lin(T, pre + "mlp.fc1")), pre + "mlp.fc2")
            T = self.ln(T, pre + "norm3", 1e-5)
            Kx = Kx + self.attn(pre + "i2t", Kx + kpe, T + T0, T, h)
            Kx = self.ln(Kx, pre + "norm4", 1e-5)
        T = T + self.attn("dec.final_t2i", T + T0, Kx + kpe, Kx, h)
        T = self.ln(T, "dec.final_norm", 1e-5)
        # outputs
        xk = Kx.transpose(1, 2).reshape(NP, C, G, G)
        y = F.conv_transpose2d(xk, p["dec.up1.w"], p["dec.up1.b"], stride=2)
        y = self.ln(y.permute(0, 2, 3, 1), "dec.up_ln", 1e-6).permute(0, 3, 1, 2)
        y = F.gelu(y)
        U = F.gelu(F.conv_transpose2d(y, p["dec.up2.w"], p["dec.up2.b"], stride=2))  # [NP, C/8, R, R]
        hv = T[:, 1]
        hv = F.relu(self.lin(hv, "dec.hyper.0"))
        hv = F.relu(self.lin(hv, "dec.hyper.1"))
        hv = self.lin(hv, "dec.hyper.2")
        logits = torch.einsum("nchw,nc->nhw", U, hv)
        iv = T[:, 0]
        iv = F.relu(self.lin(iv, "dec.iou_head.0"))
        iv = F.relu(self.lin(iv, "dec.iou_head.1"))
        iou = self.lin(iv, "dec.iou_head.2")[:, 0]
        return logits.reshape(B, M, *logits.shape[1:]), iou.reshape(B, M)


def sam_loss(logits, iou, masks, valid, sign_logits=None):
    """MODEL.md loss, flat means over valid pairs; sign_logits decides the
    detached IoU target (default: the logits themselves)."""
    B, M, R, _ = logits.shape
    x = logits.reshape(B * M, R * R)
    y = masks.reshape(B * M, R * R).to(x.dtype)
    v = valid.reshape(-1).bool()
    n = int(v.sum())
    if n == 0:
        z = (logits * 0).sum() + (iou * 0).sum()
        return z, z.detach(), z.detach(), z.detach()
    x, y, ip = x[v], y[v], iou.reshape(-1)[v]
    p = torch.sigmoid(x)
    bce = F.binary_cross_entropy_with_logits(x, y, reduction="none")
    pt = p * y + (1 - p) * (1 - y)
    at = 0.25 * y + 0.75 * (1 - y)
    focal = (at * (1 - pt) ** 2 * bce).mean(dim=1)
    dice = 1 - (2 * (p * y).sum(1) + 1) / (p.sum(1) + y.sum(1) + 1)
    with torch.no_grad():
        sx = (sign_logits.reshape(B * M, R * R)[v] if sign_logits is not None else x) > 0
        yb = y > 0.5
        inter = (sx & yb).sum(1).to(x.dtype)
        union = (sx | yb).sum(1).to(x.dtype)
        tgt = torch.where(union > 0, inter / union.clamp(min=1), torch.ones_like(union))
    iou_mse = (ip - tgt) ** 2
    loss = (20 * focal + dice + iou_mse).sum() / n
    return loss, focal.sum().detach() / n, dice.sum().detach() / n, iou_mse.sum().detach() / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    ap.add_argument("--tol-loss", type=float, default=1e-5)
    ap.add_argument("--tol-grad", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--bench", type=int, default=0, help="time N fp32 steps, print the median seconds")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    try:
        t, meta = load_safetensors(a.dump)
    except Exception as e:
        print("sam_ref.py: '%s': %s" % (a.dump, e), file=sys.stderr)
        return 2
    dtype = torch.float32 if (a.dtype == "float32" or a.bench) else torch.float64
    mdl = Model(t, meta, dtype)
    image = torch.tensor(np.array(t["in.image"]), dtype=dtype)
    points = torch.tensor(np.array(t["in.points"]), dtype=dtype)
    labels = torch.tensor(np.array(t["in.labels"]).astype(np.int64))
    masks = torch.tensor(np.array(t["in.masks"]))
    valid = torch.tensor(np.array(t["in.valid"]))
    ours_logits = torch.tensor(np.array(t["out.logits"]), dtype=dtype)

    if a.bench:
        times = []
        for _ in range(a.bench):
            t0 = time.perf_counter()
            for q in mdl.p.values():
                q.grad = None
            logits, iou = mdl.forward(image, points, labels)
            loss = sam_loss(logits, iou, masks, valid)[0]
            loss.backward()
            times.append(time.perf_counter() - t0)
        times.sort()
        print("%.6f" % times[len(times) // 2])
        return 0

    logits, iou = mdl.forward(image, points, labels)
    v = valid.bool()
    # the IoU target is a step function of the logits: where the two
    # implementations disagree on the sign of a near-zero logit, follow the
    # dump (the target is detached, MODEL.md: "from the forward pass's own logits")
    flips = int(((logits.detach() > 0) != (ours_logits > 0))[v].sum())
    loss, focal, dice, iou_mse = sam_loss(logits, iou, masks, valid, sign_logits=ours_logits if flips else None)
    loss.backward()

    fails = 0
    n = 0

    def report(ok, msg):
        nonlocal fails, n
        n += 1
        print("%sok %d - %s" % ("" if ok else "not ", n, msg))
        if not ok:
            fails += 1

    def rel(x, ref, floor=1e-12):
        return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), floor))

    if flips:
        print("# %d logit signs differ between C and torch (IoU target follows the dump)" % flips)
    lg = logits.detach().numpy()[v.numpy()]
    ol = np.array(t["out.logits"], dtype=np.float64)[v.numpy()]
    report(rel(ol, lg) <= a.tol_grad, "out.logits relative error %.2e" % rel(ol, lg))
    ri = rel(np.array(t["out.iou"], dtype=np.float64)[v.numpy()], iou.detach().numpy()[v.numpy()])
    report(ri <= a.tol_grad, "out.iou relative error %.2e" % ri)
    for name, ref in (("loss", loss), ("focal", focal), ("dice", dice), ("iou_mse", iou_mse)):
        ours = float(np.array(t["out." + name]))
        r = float(ref)
        e = abs(ours - r) / max(abs(r), 1e-12)
        report(e <= a.tol_loss, "out.%s %.9g vs torch %.9g, relative error %.2e" % (name, ours, r, e))

    grads = {}
    for name, q in mdl.p.items():
        if name == "prompt.pe_gaussian":
            if "grad." + name in t:
                report(False, "the buffer prompt.pe_gaussian has a grad. entry")
            continue
        g = q.grad.detach().numpy() if q.grad is not None else np.zeros(q.shape)
        if "grad." + name not in t:
            report(False, "grad.%s missing from the dump" % name)
            continue
        grads[name] = (np.array(t["grad." + name], dtype=np.float64), g.astype(np.float64))
    total = math.sqrt(sum(float(np.sum(r * r)) for _, r in grads.values()))
    floor = 1e-3 * total / math.sqrt(max(len(grads), 1))
    classes = {}
    worst = (0.0, "")
    for name, (ours, ref) in grads.items():
        e = rel(ours, ref, floor)
        cls = ("norm" if ".ln" in name or "norm" in name or "up_ln" in name else
               "bias" if name.endswith(".b") else
               "weight" if name.endswith(".w") else "embedding")
        classes[cls] = max(classes.get(cls, 0.0), e)
        if e > worst[0]:
            worst = (e, name)
        if a.verbose or e > a.tol_grad:
            print("# grad.%-45s %.2e (|ref| %.3e)" % (name, e, np.linalg.norm(ref)))
        if e > a.tol_grad:
            report(False, "grad.%s relative error %.2e > %.0e" % (name, e, a.tol_grad))
    report(worst[0] <= a.tol_grad, "all %d gradients within %.0e (worst %s %.2e; by class: %s)" % (
        len(grads), a.tol_grad, worst[1], worst[0],
        ", ".join("%s %.2e" % (k, classes[k]) for k in sorted(classes))))
    print("1..%d" % n)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
