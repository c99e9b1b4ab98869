#!/bin/sh
# make-venv.sh PYTHON DIR - the virtual environment the Python tests run in:
# DIR made by PYTHON's venv with --system-site-packages (so Debian's numpy
# and torch are seen), and pycocotools installed into it from PyPI, the
# reference sa1b.mask is compared with (Debian has no package of it), and
# atheris, the fuzzer of tests/fuzz/fuzz_mask.py (a wheel only: building it
# needs clang's libFuzzer).  No failure fails the build: the tests skip what
# they cannot run and say why (no venv: Debian's python3-venv; no
# pycocotools: PyPI unreachable, see DIR/pip.log; no atheris: no wheel for
# this Python or PyPI unreachable, see DIR/atheris.log).  Reuses an existing
# DIR.
py=$1
dir=$2
if [ ! -x "$dir/bin/python" ]; then
    # without ensurepip (a python without its venv package: Ubuntu's
    # python3.X-venv), a venv without pip: the tests run, pycocotools' skip
    if ! "$py" -m venv --system-site-packages "$dir" >/dev/null 2>&1 &&
        ! { rm -rf "$dir" && "$py" -m venv --system-site-packages --without-pip "$dir" >/dev/null 2>&1; }; then
        echo "make-venv.sh: cannot make a virtual environment with $py (Debian: python3-venv); the Python tests will skip" >&2
        rm -rf "$dir"
        exit 0
    fi
fi
if ! "$dir/bin/python" -c 'import pip' 2>/dev/null; then
    echo "make-venv.sh: no pip in $dir (no ensurepip); the comparisons with pycocotools will skip" >&2
elif ! "$dir/bin/python" -c 'import pycocotools.mask' 2>/dev/null; then
    if ! timeout 300 "$dir/bin/python" -m pip install -q --disable-pip-version-check pycocotools \
        >"$dir/pip.log" 2>&1; then
        echo "make-venv.sh: pycocotools not installed from PyPI (see $dir/pip.log); the comparisons with it will skip" >&2
    fi
fi
if "$dir/bin/python" -c 'import pip' 2>/dev/null && ! "$dir/bin/python" -c 'import atheris' 2>/dev/null; then
    if ! timeout 300 "$dir/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: atheris \
        >"$dir/atheris.log" 2>&1; then
        echo "make-venv.sh: atheris not installed from PyPI (see $dir/atheris.log); the Python fuzz run will skip" >&2
    fi
fi
exit 0
