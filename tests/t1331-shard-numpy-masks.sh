#!/bin/sh
# t1331: a numpy user reproduces a shard's masks bit for bit from the source
# JSON with the rules of sa1b-shard(5) alone: the page's shard_mask (taken
# from the man page source) applied to each annotation's decoded RLE equals
# the stored mask, for both --mask-resample modes, landscape, portrait and
# odd sizes where the mask content size differs from the image's scaled by
# R/S, and on the real SA-1B annotation file when it is there.  Skips
# without /usr/bin/python3 and numpy.
. "$top_srcdir/tests/test-lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "no /usr/bin/python3"
"$PY" -c 'import numpy' 2>/dev/null || skip_all "no numpy for /usr/bin/python3"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
cd "$TMP" || exit 99
check() { # TAR S R MODE DESC
    rm -f m.shard m.jsonl
    sa1b-shard -q -j 2 --image-size "$2" --mask-size "$3" --mask-resample "$4" -o m.shard "$1" &&
        sa1b-inspect --masks --rle m.shard >m.jsonl
    ok $? "shard $1 at S=$2 R=$3, $4"
    run_ok "$5" "$PY" "$SRC/tests/shard-numpy-masks.py" "$SRC/man/sa1b-shard.5" "$1" m.jsonl "$3" "$4"
    sed 's/^/# /' "$TMP/.out"
}
# 333x200 at S=64 R=13: the image's content is 64x38 pixels, 7.7 cells by
# R/S, but the mask's content is round(200*13/333) = 8 rows
sa1b-synth --quiet -n 3 -W 333 -H 200 -m 12 -s 4 -o wide.tar || exit 99
sa1b-synth --quiet -n 3 -W 150 -H 251 -m 12 -s 5 --first-id 50 -o tall.tar || exit 99
sa1b-synth --quiet -n 2 -W 97 -H 97 -m 8 -s 6 --first-id 90 -o square.tar || exit 99
for mode in area nearest; do
    check wide.tar 64 13 $mode "landscape 333x200, $mode: every mask from the page's formulas"
    check tall.tar 48 48 $mode "portrait 150x251, R = S, $mode: every mask from the page's formulas"
    check square.tar 32 7 $mode "square 97x97, $mode: every mask from the page's formulas"
done
sa1b-synth --quiet -n 2 -W 45 -H 27 -m 6 -s 7 --first-id 95 -o tiny.tar || exit 99
check tiny.tar 64 64 area "a 45x27 source at R=64 (more cells than pixels), area"
check tiny.tar 64 50 nearest "and at R=50, nearest"

# real SA-1B annotations (2000x1500, 113 masks) beside a synthetic JPEG of
# that size
if [ -n "$SHARED_DATA" ] && [ -f "$SHARED_DATA/sa_226381.json" ]; then
    sa1b-synth --quiet -n 1 -W 2000 -H 1500 -m 1 --first-id 226381 -o synth-real.tar || exit 99
    "$PY" - synth-real.tar "$SHARED_DATA/sa_226381.json" real.tar <<'PYEOF' || exit 99
import io, sys, tarfile
with tarfile.open(sys.argv[1]) as t, tarfile.open(sys.argv[3], "w") as out:
    for m in t.getmembers():
        data = t.extractfile(m).read()
        if m.name.endswith(".json"):
            data = open(sys.argv[2], "rb").read()
            m.size = len(data)
        out.addfile(m, io.BytesIO(data))
PYEOF
    check real.tar 256 64 area "real SA-1B masks, area: every one from the page's formulas"
    check real.tar 1024 256 nearest "real SA-1B masks at R=256, nearest: every one from the page's formulas"
else
    skip 4 "no real SA-1B data (../shared/data/sa1b-real beside the source tree, or \$SA1B_SHARED/data/sa1b-real)"
fi
done_testing
