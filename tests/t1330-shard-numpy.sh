#!/bin/sh
# t1330-shard-numpy.sh - the numpy reader printed in sa1b-shard(5)'s
# EXAMPLES, extracted from the man page source, reads a shard exactly as
# sa1b-inspect does: packed (version 1) and runs (version 2, at R and at
# the source size).  Skips without /usr/bin/python3 and numpy.
. "$top_srcdir/tests/test-lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "no /usr/bin/python3"
"$PY" -c 'import numpy' 2>/dev/null || skip_all "no numpy for /usr/bin/python3"
GEN="$BUILD/tests/test-shard-gen"
cd "$TMP" || exit 99
for spec in "raw -s 32 -r 8" "jpeg -s 48 -r 13" "raw -s 16 -r 16"; do
    set -- $spec
    fmt=$1; shift
    "$GEN" gen n.shard -n 6 -m 7 -f "$fmt" "$@" || exit 99
    sa1b-inspect --rle n.shard > n.jsonl || exit 99
    run_ok "numpy reader from the man page agrees with sa1b-inspect ($spec)" \
        "$PY" "$SRC/tests/shard-numpy-check.py" "$SRC/man/sa1b-shard.5" n.shard n.jsonl
    sed 's/^/# /' "$TMP/.out"
done
# version 2 (runs), from the fixture tar
cp "$SRC/tests/data/v1-input.tar" v1.tar || exit 99
for spec in "--image-size 32 --mask-size 12 --mask-format rle" \
    "--image-size 64 --mask-size 64 --image-format jpeg --mask-format rle" \
    "--image-size 32 --mask-size source"; do
    # shellcheck disable=SC2086
    sa1b-shard -q $spec -o r.shard v1.tar || exit 99
    sa1b-inspect --rle r.shard > r.jsonl || exit 99
    run_ok "numpy reader from the man page agrees with sa1b-inspect (runs, $spec)" \
        "$PY" "$SRC/tests/shard-numpy-check.py" "$SRC/man/sa1b-shard.5" r.shard r.jsonl
    sed 's/^/# /' "$TMP/.out"
done
done_testing
