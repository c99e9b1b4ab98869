#!/bin/sh
# t1889-python-messages.sh - the Python extension's errors that quote an
# argument give it as repr() does: one line, its control characters
# escaped (Shard.masks' and Loader's resample, a counts string, a polygon,
# the paths of Shard, verify and Loader, which the library's messages
# quote as they are).
. "$top_srcdir/tests/test-lib.sh"
. "$SRC/python/tests/py-lib.sh"
cd "$TMP" || exit 99
"$BUILD/tests/test-shard-gen" gen raw.shard -n 2 -m 3 -f raw -s 16 -r 8 >/dev/null || exit 99
"$PY" - "$SRC/python/tests" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import tap
import sa1b
import sa1b.mask as M


def message(fn):
    try:
        fn()
    except Exception as e:  # the message is what is looked at
        return "%s: %s" % (type(e).__name__, e)
    return "(no exception)"


def one_line(fn, want, desc):
    m = message(fn)
    tap.ok(want in m and not any(ord(c) < 32 or ord(c) == 127 for c in m), desc, "message: %r" % m)


s = sa1b.Shard("raw.shard")
one_line(lambda: s.masks(0, resample="are\na\x1b"), "ValueError: resample must be 'area' or 'nearest', not 'are\\na\\x1b'",
         "Shard.masks: a resample with control characters")
one_line(lambda: sa1b.Loader("raw.shard", mask_resample="x\ny"),
         "ValueError: Loader: mask_resample must be 'area' or 'nearest', not 'x\\ny'",
         "Loader: a mask_resample with a newline")
one_line(lambda: M.area({"size": [3, 4], "counts": "32\n201"}), "bad byte 0x0a at offset 2",
         "a counts string with a newline")
one_line(lambda: M.decode({"size": [3, 4], "counts": "3\x7f"}), "bad byte 0x7f at offset 1",
         "a counts string with DEL")
one_line(lambda: M.decode({"size": [3, 4], "counts": "32201"}, size=(2, 2), resample="a\nb"),
         "'a\\nb'", "decode: a resample with a newline")
one_line(lambda: M.frPyObjects([[0, 0, float("nan"), 1, 2, 2]], 4, 4), "coordinate 2 (nan)",
         "a polygon with NaN")
one_line(lambda: sa1b.Shard("no\nsuch.shard"), "OSError: 'no\\nsuch.shard': cannot open",
         "Shard: a missing path with a newline")
one_line(lambda: sa1b.verify("no\x1bsuch.shard"), "'no\\x1bsuch.shard'", "verify: a missing path with ESC")
one_line(lambda: sa1b.Loader("no\nsuch/*.shard"), "'no\\nsuch/*.shard'", "Loader: a pattern with a newline")
tap.done()
PY
