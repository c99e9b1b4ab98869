#!/bin/sh
# t1886-python-torch-cuda.sh - sa1b.torch's pinned-memory batches reach a
# CUDA device intact with .cuda(non_blocking=True)
# (python/tests/test_torch_cuda.py).  Skips without torch or a CUDA device
# (scripts/gpu-check verify runs it on a GPU).
. "$top_srcdir/tests/test-lib.sh"
. "$SRC/python/tests/py-lib.sh"
"$PY" -c 'import torch' 2>/dev/null || skip_all "no torch (Debian: python3-torch)"
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    skip_all "no CUDA device for torch"
cd "$TMP" || exit 99
sa1b-synth -n 7 -W 200 -H 150 -m 4 -s 5 -o a.tar --quiet &&
sa1b-synth -n 6 -W 150 -H 220 -m 3 -s 6 --first-id 100 -o b.tar --quiet &&
sa1b-shard -q --image-size 32 --mask-size 8 -o out a.tar b.tar || exit 99
"$PY" "$SRC/python/tests/test_torch_cuda.py" out/a.shard out/b.shard
