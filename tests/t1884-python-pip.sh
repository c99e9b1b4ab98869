#!/bin/sh
# t1884-python-pip.sh - pip install ./python into a fresh virtual environment
# builds the package (the extension compiled with libsa1b's sources), and
# the installed package works outside the source tree.  The tree is copied
# first (pip builds in place).  --no-build-isolation: setuptools comes from
# Debian (python3-setuptools), so the test needs no network.
. "$top_srcdir/tests/test-lib.sh"
. "$SRC/python/tests/py-lib.sh"
unset PYTHONPATH
"$PY" -c 'import setuptools' 2>/dev/null || skip_all "no setuptools (Debian: python3-setuptools)"
pybase=$("$PY" -c 'import sys; print(sys._base_executable)')
mkdir -p "$TMP/src" && cp -R "$SRC/configure.ac" "$SRC/rle" "$SRC/pipeline" "$SRC/python" "$TMP/src/" || exit 99
rm -rf "$TMP/src/python/build" "$TMP/src/python/"*.egg-info
run_ok "venv" "$pybase" -m venv --system-site-packages "$TMP/venv"
run_ok "pip install ./python" "$TMP/venv/bin/python" -m pip install -q --disable-pip-version-check \
    --no-build-isolation "$TMP/src/python"
[ -s "$TMP/.err" ] && sed 's/^/# pip: /' "$TMP/.err" | tail -5
cd "$TMP" || exit 99
run_ok "import sa1b from the venv, outside the tree" "$TMP/venv/bin/python" -c '
import sys, numpy as np, sa1b, sa1b.mask as mask_util
assert "/venv/" in sa1b.__file__, sa1b.__file__
m = np.asfortranarray(np.array([[0, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 0]], np.uint8))
r = mask_util.encode(m)
assert r == {"size": [3, 4], "counts": b"32201"}, r
assert (mask_util.decode(r) == m).all()
assert sa1b.__version__ == sa1b.version()
print(sa1b.__version__)'
is "$(cat "$TMP/.out")" "$(sed -n 's/^AC_INIT(\[sa1b\], \[\([^]]*\)\].*/\1/p' "$SRC/configure.ac")" \
    "the installed version is configure.ac's"
done_testing
