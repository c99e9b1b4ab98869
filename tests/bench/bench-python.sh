#!/bin/sh
# bench-python.sh - make bench for the Python package, in the tests' virtual
# environment with the staged package: sa1b.mask against pycocotools.mask
# on the real SA-1B masks (python/bench/bench_mask.py), and images/s into a
# PyTorch loop, sa1b.torch against webdataset + pycocotools + a DataLoader
# with 2 workers (python/bench/bench_loader.py; webdataset is installed
# into the venv from PyPI when reachable).  Skips what is missing.
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
B=$(cd "$top_builddir" && pwd)
py="$B/python/venv/bin/python"
if [ ! -d "$B/python/stage/sa1b" ] || [ ! -x "$py" ]; then
    echo "bench-python: the Python package or its venv is not built (python3-dev, python3-venv): skipped"
    exit 0
fi
"$py" -c 'import webdataset' 2>/dev/null ||
    timeout 300 "$py" -m pip install -q --disable-pip-version-check webdataset >/dev/null 2>&1 ||
    echo "bench-python: webdataset not installed from PyPI: the baseline reads the tars with tarfile"
export PYTHONPATH="$B/python/stage" top_srcdir
PATH="$B/shard-tools:$PATH"
"$py" "$top_srcdir/python/bench/bench_mask.py" || exit 1
"$py" "$top_srcdir/python/bench/bench_loader.py" "${SA1B_BENCH_LOADER_IMAGES:-64}"
