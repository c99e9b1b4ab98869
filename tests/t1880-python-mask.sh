#!/bin/sh
# t1880-python-mask.sh - sa1b.mask against pycocotools.mask, the real SA-1B
# annotations and its own additions (python/tests/test_mask.py).
. "$top_srcdir/tests/test-lib.sh"
. "$SRC/python/tests/py-lib.sh"
"$PY" "$SRC/python/tests/test_mask.py"
