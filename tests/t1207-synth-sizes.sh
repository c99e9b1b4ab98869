#!/bin/sh
# t1207-synth-sizes.sh - --sizes MIN:MAX: the default range keeps the bytes,
# a larger range gives larger masks that still pass the format checker, and
# malformed ranges are usage errors.
. "$top_srcdir/tests/test-lib.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "/usr/bin/python3 missing"
CHECK="$SRC/tests/synth_check.py"
S="-n 4 -W 240 -H 160 -m 12 -s 5 --nesting flat"

run_ok "default sizes" sa1b-synth $S -o "$TMP/d.tar"
run_ok "--sizes 0.015:0.28" sa1b-synth $S --sizes 0.015:0.28 -o "$TMP/same.tar"
cmp -s "$TMP/d.tar" "$TMP/same.tar"
ok $? "--sizes 0.015:0.28 is the default, byte for byte"
run_ok "--sizes 0.15:0.4" sa1b-synth $S --sizes 0.15:0.4 -o "$TMP/big.tar"
px=""
"$PY" -c 'import numpy, PIL' 2>/dev/null && px=--pixels
run_ok "large shapes pass the checker" "$PY" "$CHECK" "$TMP/big.tar" --images 4 --width 240 --height 160 --flat $px

# objects: masks that are not among the largest (the regions); compare the
# median area of all masks, which the larger shapes must raise
median() {
    "$PY" - "$1" <<'PYEOF'
import json, sys, tarfile
areas = []
with tarfile.open(sys.argv[1]) as t:
    for m in t.getmembers():
        if m.name.endswith(".json"):
            areas += [a["area"] for a in json.load(t.extractfile(m))["annotations"]]
areas.sort()
print(areas[len(areas) // 2])
PYEOF
}
a=$(median "$TMP/d.tar")
b=$(median "$TMP/big.tar")
[ -n "$a" ] && [ -n "$b" ] && [ "$b" -gt "$a" ]
ok $? "larger --sizes, larger masks (median area $a -> $b)"

for bad in 0 0.5 0.3:0.2 0:0.1 0.1:1.5 a:b 0.1: :0.2 0.1:0.2x; do
    run_status 2 "--sizes '$bad' is a usage error" sa1b-synth --sizes "$bad" -o "$TMP/u.tar"
done
grep_ok "^sa1b-synth: --sizes: '0.1:0.2x' is not MIN:MAX" "$TMP/.err" "... saying why"
[ ! -e "$TMP/u.tar" ]
ok $? "no output after a usage error"

done_testing
