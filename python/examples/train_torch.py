"""train_torch.py SHARD... [--steps N] - a complete PyTorch training loop over
sa1b shards: a toy promptable segmenter (image + one point prompt -> mask
logits at the shards' mask resolution) trained with the loader's batches.

    python3 train_torch.py out/*.shard --steps 200

The loader's own threads decode, pick masks and points and flip, with the
GIL released, so the DataLoader needs no worker processes
(num_workers=0): the tensors are views of the loader's buffers.  Under
torchrun, ShardDataset takes rank and world from torch.distributed and
each rank gets its slice of every global batch.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

from sa1b.torch import ShardDataset


class TinySegmenter(nn.Module):
    """image [B, 3, S, S] + a point heat map -> mask logits [B, 1, R, R]"""

    def __init__(self, R):
        super().__init__()
        self.R = R
        self.net = nn.Sequential(nn.Conv2d(4, 16, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(16, 1, 1))

    def forward(self, image, heat):
        x = F.interpolate(image, size=(self.R, self.R), mode="area")
        return self.net(torch.cat([x, heat], dim=1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shards", nargs="+")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    ds = ShardDataset(args.shards, batch=args.batch, masks=1, points=1, seed=0, flip=0.5,
                      normalize=True, pin_memory=device == "cuda")
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    model, step, epoch = None, 0, 0
    while step < args.steps:
        ds.set_epoch(epoch)
        for b in dl:
            image = b["image"].to(device, non_blocking=True)           # [B, 3, S, S] float32
            masks = b["masks"][:, 0].to(device, non_blocking=True)     # [B, R, R] uint8
            point = b["points"][:, 0, 0].to(device, non_blocking=True) # [B, 2] x, y in S pixels
            keep = (b["valid"][:, 0] == 1).to(device)                  # padding rows out
            S, R = image.shape[-1], masks.shape[-1]
            if model is None:
                model = TinySegmenter(R).to(device)
                opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            cell = ((point + 0.5) * R / S).long().clamp(0, R - 1)
            heat = torch.zeros(image.shape[0], 1, R, R, device=device)
            heat[torch.arange(image.shape[0]), 0, cell[:, 1], cell[:, 0]] = 1
            logits = model(image, heat)[:, 0]
            loss = F.binary_cross_entropy_with_logits(logits[keep], masks[keep].float())
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 10 == 0 or step == args.steps:
                print("epoch %d step %d loss %.4f" % (epoch, step, loss.item()), flush=True)
            if step == args.steps:
                break
        epoch += 1


if __name__ == "__main__":
    main()
