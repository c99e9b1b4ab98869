#!/bin/sh
# t1885-python-rle.sh - sa1b.Shard and sa1b.Loader on version-2 shards
# (run-length and source-size masks) against the packed shard of the same
# input (python/tests/test_rle.py).
. "$top_srcdir/tests/test-lib.sh"
. "$SRC/python/tests/py-lib.sh"
cd "$TMP" || exit 99
sa1b-synth -n 4 -m 6 -W 300 -H 200 -o in.tar >/dev/null 2>&1 || exit 99
sa1b-shard -q --image-size 64 --mask-size 16 --keep-empty-masks -o p.shard in.tar || exit 99
sa1b-shard -q --image-size 64 --mask-size 16 --keep-empty-masks --mask-format rle -o r.shard in.tar || exit 99
sa1b-shard -q --image-size 64 --mask-size source -o s.shard in.tar || exit 99
"$PY" "$SRC/python/tests/test_rle.py" p.shard r.shard s.shard 16
