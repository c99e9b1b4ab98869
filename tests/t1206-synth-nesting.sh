#!/bin/sh
# t1206-synth-nesting.sh - --nesting: full (the default) keeps its bytes and
# its nested, overlapping masks; flat gives the same pictures with only the
# regions and objects, no two masks of an image sharing a pixel.
. "$top_srcdir/tests/test-lib.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "/usr/bin/python3 missing"
CHECK="$SRC/tests/synth_check.py"
S="-n 3 -W 160 -H 120 -m 10 -s 7"

run_ok "default" sa1b-synth $S -o "$TMP/d.tar"
run_ok "--nesting full" sa1b-synth $S --nesting full -o "$TMP/full.tar"
cmp -s "$TMP/d.tar" "$TMP/full.tar"
ok $? "--nesting full is the default, byte for byte"
# the masks of the default, fingerprinted before --nesting existed
run_ok "default masks digest" "$PY" "$CHECK" "$TMP/d.tar" --digest
grep_ok '^digest: a8687f66ac9656edf56443aa24fa3f9968eba0d387a7cb506aa933377556e6d6$' "$TMP/.out" \
    "default masks unchanged"
run_ok "full, 480x320" sa1b-synth -n 2 -W 480 -H 320 -m 20 -s 1 -o "$TMP/g.tar"
run_ok "480x320 digest" "$PY" "$CHECK" "$TMP/g.tar" --digest
grep_ok '^digest: 7c92ba732c8d984e15e857145f6b4b75ef0c97568aa9f5a45bb0c39227c5307f$' "$TMP/.out" \
    "480x320 masks unchanged"
run_status 1 "full masks nest (the overlap check sees it)" "$PY" "$CHECK" "$TMP/d.tar" --flat
grep_ok 'overlap' "$TMP/.out" "... naming the pair"

px=""
"$PY" -c 'import numpy, PIL' 2>/dev/null && px=--pixels
run_ok "--nesting flat" sa1b-synth $S --nesting flat -o "$TMP/flat.tar"
run_ok "flat passes the checker, no two masks overlap" "$PY" "$CHECK" "$TMP/flat.tar" --images 3 \
    --width 160 --height 120 --flat $px
run_ok "flat, portrait, 40 masks" sa1b-synth -n 2 -W 201 -H 333 -m 40 -s 11 --nesting flat -o "$TMP/p.tar"
run_ok "portrait flat passes, no overlap" "$PY" "$CHECK" "$TMP/p.tar" --images 2 --flat $px

mkdir "$TMP/f" "$TMP/n"
(cd "$TMP/f" && tar xf ../full.tar) && (cd "$TMP/n" && tar xf ../flat.tar)
ok $? "tars extract"
same=1
for i in 1 2 3; do cmp -s "$TMP/f/sa_$i.jpg" "$TMP/n/sa_$i.jpg" || same=0; done
is "$same" 1 "flat and full: the same pictures"
"$PY" - "$TMP/f" "$TMP/n" >"$TMP/sub" <<'PYEOF'
import json, sys
for i in (1, 2, 3):
    full = [a["segmentation"]["counts"] for a in json.load(open("%s/sa_%d.json" % (sys.argv[1], i)))["annotations"]]
    flat = [a["segmentation"]["counts"] for a in json.load(open("%s/sa_%d.json" % (sys.argv[2], i)))["annotations"]]
    print(int(set(flat) <= set(full) and 0 < len(flat) < len(full)))
PYEOF
is "$(tr -d '\n' <"$TMP/sub")" "111" "flat masks: a proper subset of the full ones"

run_status 2 "--nesting bogus is a usage error" sa1b-synth --nesting bogus -o "$TMP/u.tar"
grep_ok "^sa1b-synth: --nesting: 'bogus'" "$TMP/.err" "... saying why"

done_testing
