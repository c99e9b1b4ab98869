#!/bin/sh
# t1887-python-fuzz-replay.sh - the Python extension's arguments (RLE dicts,
# uncompressed counts, polygons, boxes, arrays): the corpus of
# tests/fuzz/fuzz_mask.py (tests/fuzz/corpus/python, valid and hostile
# inputs) replayed through its one-input function, without atheris: an
# exception other than the clean ones, a message of more than one line, an
# answer that does not hold together or a crash fails it.
. "$top_srcdir/tests/test-lib.sh"
. "$SRC/python/tests/py-lib.sh"
cd "$TMP" || exit 99
exec "$PY" "$SRC/tests/fuzz/fuzz_mask.py" --replay "$SRC/tests/fuzz/corpus/python"
