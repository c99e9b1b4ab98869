#!/bin/sh
# t1888-python-fuzz-atheris.sh - a short fuzz run of the Python extension's
# arguments: tests/fuzz/fuzz_mask.py under atheris (installed into the
# tests' virtual environment by python/tests/make-venv.sh), a fixed number
# of inputs (-atheris_runs, a fixed seed) grown from the seed corpus; any
# finding fails it (its traceback and input in the log).  Skips, saying
# why, where atheris could not be installed, and under AddressSanitizer
# (where t1887 replays the corpus instead).
. "$top_srcdir/tests/test-lib.sh"
. "$SRC/python/tests/py-lib.sh"
# py-lib.sh's asan: the runtime it preloads into the interpreter.  atheris
# brings its own libFuzzer, which then reports the interpreter's leaks
# (OpenSSL's) as findings, and its exit throws through an ASan interceptor
# that was never resolved (CHECK failed: real___cxa_throw): no result
[ -z "$asan" ] ||
    skip_all "under AddressSanitizer (atheris's libFuzzer and the preloaded runtime do not mix; t1887 replays the corpus)"
"$PY" -c 'import atheris' 2>/dev/null ||
    skip_all "no atheris in the tests' virtual environment (no wheel for this Python, or PyPI unreachable: see $BUILD/python/venv/atheris.log)"
cd "$TMP" || exit 99
runs=30000
mkdir corpus && cp "$SRC"/tests/fuzz/corpus/python/* corpus/ || exit 99
"$PY" "$SRC/tests/fuzz/fuzz_mask.py" -atheris_runs=$runs -seed=1 -max_len=1024 corpus >fuzz.log 2>&1
rc=$?
ok $rc "$runs inputs from atheris: no finding"
if [ $rc -ne 0 ]; then
    grep -v '^#[0-9]' fuzz.log | tail -40 | sed 's/^/# /'
    for f in crash-* leak-* oom-* timeout-*; do
        [ -f "$f" ] && echo "# $f: $(od -An -tx1 "$f" | tr -d '\n' | cut -c1-400)"
    done
fi
grep_ok "^Done $runs " fuzz.log "... all $runs run"
done_testing
