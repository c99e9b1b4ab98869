# py-lib.sh - sourced after tests/test-lib.sh by the Python tests
# (tests/t188x-python-*.sh): sets PY (the tests' virtual environment's
# interpreter, python/venv from make-venv.sh) and PYTHONPATH (the package
# staged by the build in python/stage), or skips the whole test saying what
# is missing.  Under AddressSanitizer (scripts/test --sanitize) the
# interpreter is not instrumented: PY is then a wrapper that preloads the
# runtime into it (not into the shell's tools, which would fail on their own
# leaks), and the leaks of the interpreter and numpy are suppressed
# (python/tests/lsan.supp), never the extension's.
STAGE="$BUILD/python/stage"
PY="$BUILD/python/venv/bin/python"
[ -d "$STAGE/sa1b" ] || skip_all "the Python extension is not built (--with-python=no, or no Python.h at configure: Debian python3-dev)"
[ -x "$PY" ] || skip_all "no virtual environment for the tests (Debian: python3-venv)"
"$PY" -c 'import numpy' 2>/dev/null || skip_all "no numpy (Debian: python3-numpy)"
PYTHONPATH="$STAGE"
export PYTHONPATH
asan=$(ldd "$STAGE"/sa1b/_sa1b*.so 2>/dev/null | awk '/libasan/ { print $3 }')
if [ -n "$asan" ]; then
    {
        echo '#!/bin/sh'
        echo "LD_PRELOAD='$asan'"
        echo "LSAN_OPTIONS='suppressions=$SRC/python/tests/lsan.supp:print_suppressions=0'"
        echo "ASAN_OPTIONS='${ASAN_OPTIONS:+$ASAN_OPTIONS:}malloc_context_size=2'"
        # not test-lib.sh's C locale: with it, GCC 12's LeakSanitizer
        # crashed at the exit of examples/train_torch.py on an Intel Xeon
        # VM (every run; "Tracer caught signal 11" on a dynamic TLS block
        # it read as 0x1bb-0x10000012bd), and the same run in C.UTF-8
        # did not (t1883)
        echo "LC_ALL=C.UTF-8"
        echo 'export LD_PRELOAD LSAN_OPTIONS ASAN_OPTIONS LC_ALL'
        echo "exec '$PY' \"\$@\""
    } >"$TMP/python"
    chmod +x "$TMP/python"
    PY="$TMP/python"
fi
