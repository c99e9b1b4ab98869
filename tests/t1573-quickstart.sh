#!/bin/sh
# t1573: docs/QUICKSTART.md works as written: each of its sh blocks is run
# in order in a fresh folder (the build and the pip install left out: the
# suite runs the built programs, and the Python block the package the
# build staged, in the tests' virtual environment; it is skipped without
# the extension or torch), each must exit 0, and what the page says the
# commands leave is there.  README.md starts with its two commands and
# links the page right after them.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null && command -v sa1b-train >/dev/null || skip_all "programs not built"
page="$SRC/docs/QUICKSTART.md"
awk -v dir="$TMP" '/^```sh$/ { n++; f = 1; next } /^```$/ { f = 0 } f { print > (dir "/block" n ".sh") }' "$page"
mkdir "$TMP/root" && cd "$TMP/root" || exit 99
n=0
# the tests' interpreter as the Python tests have it (py-lib.sh: under
# AddressSanitizer a wrapper that preloads the runtime), when it has torch
pyexe=$( (. "$SRC/python/tests/py-lib.sh" >/dev/null 2>&1 && "$PY" -c 'import numpy, torch' >/dev/null 2>&1 &&
    echo "$PY") )
py_ok=1
[ -n "$pyexe" ] || py_ok=0
for b in "$TMP"/block*.sh; do
    n=$((n + 1))
    if grep -q '^scripts/build build$' "$b"; then     # the build: the suite's own; then into quickstart/
        grep -q '^mkdir -p quickstart && cd quickstart$' "$b"
        ok $? "block $n: builds, then makes quickstart/ and goes there"
        mkdir -p quickstart && cd quickstart || exit 99
        continue
    fi
    if grep -q 'pip install ./python' "$b"; then
        ok 0 "block $n: the pip install (t1884 checks pip install ./python)"
        continue
    fi
    if grep -q '\.\./venv/bin/python' "$b"; then
        if [ $py_ok = 0 ]; then
            skip 2 "no staged Python package, tests' virtual environment or torch"
            continue
        fi
        sed "s#\.\./venv/bin/python#PYTHONPATH='$BUILD/python/stage' '$pyexe'#" "$b" >"$b.run"
    else
        cp "$b" "$b.run"
    fi
    sh -e "$b.run" >"$TMP/out$n" 2>"$TMP/err$n"
    rc=$?
    ok $rc "block $n: $(head -1 "$b")"
    [ $rc -eq 0 ] || sed 's/^/# /' "$TMP/err$n" | tail -5
    if grep -q '\.\./venv/bin/python' "$b"; then
        grep -q '^torch.Size(\[4, 3, 128, 128\]) torch.Size(\[4, 8, 32, 32\])' "$TMP/out$n"
        ok $? "block $n: a batch of 4 images of 128x128 with 8 masks of 32x32 from PyTorch"
    fi
done
for f in run1/log.jsonl run1/model-100.safetensors run1/state-100.bin run1/latest shards/manifest.json \
    eval1/export/00003-iou*.png ft1/model-50.safetensors; do
    test -e "$f"
    ok $? "quickstart/$f is there"
done
# README: the two commands first, then the link
is "$(grep '^    [a-z]' "$SRC/README.md" | head -2 | tr -d ' ' | tr '\n' ' ')" "scripts/demo scripts/test " \
    "README.md starts with its two commands"
awk '/^    scripts\/test$/ { t = 1; next } t && NF { print; exit }' "$SRC/README.md" | grep -q 'docs/QUICKSTART.md'
ok $? "and links docs/QUICKSTART.md right after them"
done_testing
