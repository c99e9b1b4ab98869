#!/bin/sh
# t1204-synth-fullsize.sh - one image at full SA-1B size with the default
# ~100 masks, through the format checker.
. "$top_srcdir/tests/test-lib.sh"

run_ok "full-size image" sa1b-synth -n 1 -s 5 -o "$TMP/f.tar"
tar xOf "$TMP/f.tar" sa_1.json | grep -q '"width": 2250, "height": 1500'
ok $? "2250x1500 by default"
PY=/usr/bin/python3
if [ -x "$PY" ]; then
    run_ok "full-size image passes the checker" "$PY" "$SRC/tests/synth_check.py" "$TMP/f.tar" \
        --images 1 --width 2250 --height 1500 --masks 100
    sed 's/^/# /' "$TMP/.out"
else
    skip 1 "/usr/bin/python3 missing"
fi
done_testing
