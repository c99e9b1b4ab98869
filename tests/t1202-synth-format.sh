#!/bin/sh
# t1202-synth-format.sh - every detail of the SA-1B format, checked by
# synth_check.py (its own RLE decoder): schema and key order, single-line
# JSON, every quirk over a run of images, counts that decode to the declared
# area and SA-1B bbox, points inside their masks, crop boxes holding the
# masks, JPEGs of the declared size, masks visible in the pixels.
. "$top_srcdir/tests/test-lib.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "/usr/bin/python3 missing"
CHECK="$SRC/tests/synth_check.py"

px=""
"$PY" -c 'import numpy, PIL' 2>/dev/null && px=--pixels

run_ok "small scenes" sa1b-synth -n 6 -W 160 -H 120 -m 10 -s 3 -o "$TMP/s.tar"
run_ok "small scenes pass the checker, with every quirk" "$PY" "$CHECK" "$TMP/s.tar" --images 6 \
    --width 160 --height 120 --masks 10 --quirks $px
sed 's/^/# /' "$TMP/.out"

run_ok "portrait, 40 masks, odd size" sa1b-synth -n 3 -W 201 -H 333 -m 40 -s 11 --first-id 5000000 \
    -o "$TMP/p.tar"
run_ok "portrait scenes pass the checker" "$PY" "$CHECK" "$TMP/p.tar" --images 3 --first-id 5000000 \
    --width 201 --height 333 --masks 40 --quirks $px
grep_ok 'id_over_2_32=[1-9]' "$TMP/.out" "ids above 2^32 with a large --first-id"

run_ok "no masks" sa1b-synth -n 2 -W 64 -H 48 -m 0 -o "$TMP/z.tar"
run_ok "no masks: still valid" "$PY" "$CHECK" "$TMP/z.tar" --images 2 --masks 0
tar xOf "$TMP/z.tar" sa_1.json >"$TMP/z.json"
grep_ok '"annotations": \[\]\}$' "$TMP/z.json" "empty annotation list"

run_ok "one mask, tiny image" sa1b-synth -n 2 -W 8 -H 8 -m 1 -o "$TMP/t.tar"
run_ok "tiny image passes" "$PY" "$CHECK" "$TMP/t.tar" --images 2 --width 8 --height 8

run_ok "quality 30" sa1b-synth -n 1 -W 160 -H 120 -m 10 --quality 30 -o "$TMP/q.tar"
small=$(tar xOf "$TMP/q.tar" sa_1.jpg | wc -c)
big=$(tar xOf "$TMP/s.tar" sa_1.jpg | wc -c)
[ "$small" -lt "$big" ]
ok $? "--quality 30 makes a smaller JPEG ($small < $big bytes)"

# the checker itself catches a wrong area and an unescaped counts string
tar xOf "$TMP/s.tar" sa_1.json >"$TMP/1.json"
sed 's/"area": \([0-9]*\)/"area": 1\1/' "$TMP/1.json" >"$TMP/bad.json"
mkdir "$TMP/bad" && tar xf "$TMP/s.tar" -C "$TMP/bad" sa_1.jpg && cp "$TMP/bad.json" "$TMP/bad/sa_1.json"
(cd "$TMP/bad" && tar cf ../bad.tar --owner=root --group=root --mtime=@1680307200 sa_1.jpg sa_1.json)
run_status 1 "checker rejects a wrong area" "$PY" "$CHECK" "$TMP/bad.tar"
grep_ok 'area' "$TMP/.out" "... naming it"

done_testing
