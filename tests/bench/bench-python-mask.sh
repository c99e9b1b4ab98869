#!/bin/sh
# bench-python-mask.sh - make bench: sa1b.mask against pycocotools.mask on
# the real SA-1B masks (python/bench/bench_mask.py), in the tests' virtual
# environment with the staged package; skips what is missing.
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
py="$top_builddir/python/venv/bin/python"
if [ ! -d "$top_builddir/python/stage/sa1b" ] || [ ! -x "$py" ]; then
    echo "bench-python-mask: the Python package or its venv is not built (python3-dev, python3-venv): skipped"
    exit 0
fi
PYTHONPATH="$top_builddir/python/stage" top_srcdir="$top_srcdir" "$py" "$top_srcdir/python/bench/bench_mask.py"
