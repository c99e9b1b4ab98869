#!/bin/sh
# t1001-sa1b-rle-info.sh - sa1b-rle info on crafted JSON lines (good and
# bad masks, several objects per line, uncompressed counts) and on the real
# SA-1B file when ../shared is there (pretty-printed and single-line).
. "$top_srcdir/tests/test-lib.sh"

cat >"$TMP/in.jsonl" <<'JSON'
{"size": [3, 4], "counts": "0<"}
{"size": [3, 4], "counts": "0<x", "id": "abc"}
{"size":[3,4],"counts":"32201","id":12345678901} {"size":[3,4],"counts":"<","id":7}
not json
{"size": [3, 4], "counts": [3, 2, 2, 2, 3]}
{"size": [3, 4], "counts": "0P"}
{"size": [3, 4], "counts": "5"}
{"segmentation": {"size": [3, 4], "counts": "327"}, "id": 9}
JSON
run_status 1 "info with bad masks exits 1" sa1b-rle info "$TMP/in.jsonl"
cp "$TMP/.out" "$TMP/out"; cp "$TMP/.err" "$TMP/err"
is "$(wc -l <"$TMP/out" | tr -d ' ')" 5 "five good masks printed"
is "$(sed -n 1p "$TMP/out")" '{"area":12,"bbox":[0,0,4,3],"sa1b_bbox":[0,0,3,2],"runs":2}' "all-ones 3x4"
is "$(sed -n 2p "$TMP/out")" '{"id":12345678901,"area":4,"bbox":[1,0,2,3],"sa1b_bbox":[1,0,1,2],"runs":5}' "id beyond 2^31 and bboxes"
is "$(sed -n 3p "$TMP/out")" '{"id":7,"area":0,"bbox":[0,0,0,0],"sa1b_bbox":[0,0,0,0],"runs":1}' "empty mask on the same line"
is "$(sed -n 4p "$TMP/out")" '{"area":4,"bbox":[1,0,2,3],"sa1b_bbox":[1,0,1,2],"runs":5}' "uncompressed counts"
is "$(sed -n 5p "$TMP/out")" '{"id":9,"area":2,"bbox":[1,0,1,2],"sa1b_bbox":[1,0,0,1],"runs":3}' "an annotation object"
grep_ok "^sa1b-rle: $TMP/in.jsonl:2: mask 1: counts: bad character 'x' at offset 2\$" "$TMP/err" "bad character: file, line, mask, offset"
grep_ok "^sa1b-rle: $TMP/in.jsonl:4: invalid JSON" "$TMP/err" "invalid JSON line named"
grep_ok ":6: mask 5: counts: string ends inside run 1" "$TMP/err" "dangling continuation"
grep_ok ":7: mask 6: run sum 5 != 3x4" "$TMP/err" "short run sum"
is "$(wc -l <"$TMP/err" | tr -d ' ')" 4 "four error lines"

printf '{"size":[3,4],"counts":"<"}\n' | sa1b-rle info >"$TMP/o" 2>&1
ok $? "info reads standard input"
is "$(cat "$TMP/o")" '{"area":0,"bbox":[0,0,0,0],"sa1b_bbox":[0,0,0,0],"runs":1}' "stdin result"
printf '{"size":[3,4],"counts":"<"}\n' | sa1b-rle info - >"$TMP/o" 2>&1
ok $? "info reads - as standard input"
run_status 1 "missing file" sa1b-rle info "$TMP/nonexistent"
grep_ok "cannot open '$TMP/nonexistent'" "$TMP/.err" "missing file named"

if [ -n "$SHARED_DATA" ] && [ -x /usr/bin/python3 ]; then
    f="$SHARED_DATA/sa_226381.json"
    run_ok "info on the real file" sa1b-rle info "$f"
    cp "$TMP/.out" "$TMP/real"
    is "$(wc -l <"$TMP/real" | tr -d ' ')" 113 "113 masks"
    /usr/bin/python3 - "$f" "$TMP/real" <<'PY' >"$TMP/py" 2>&1
import json, sys
anns = json.load(open(sys.argv[1]))["annotations"]
out = [json.loads(l) for l in open(sys.argv[2])]
assert len(out) == len(anns), (len(out), len(anns))
for a, o in zip(anns, out):
    assert o["id"] == a["id"], (o, a["id"])
    assert o["area"] == a["area"], (o, a["area"])
    assert o["sa1b_bbox"] == [int(v) for v in a["bbox"]], (o, a["bbox"])
    b = a["bbox"]
    assert o["bbox"] == [int(b[0]), int(b[1]), int(b[2]) + 1, int(b[3]) + 1], o
print("ok")
PY
    ok $? "ids, areas and bboxes match the file"
    sed 's/^/# /' "$TMP/py"
    # single-line form, and a corrupted copy: errors name the mask's line
    /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
open(sys.argv[2], "w").write(json.dumps(d))
d["annotations"][5]["segmentation"]["counts"] += "~"
open(sys.argv[3], "w").write(json.dumps(d, indent=2))' "$f" "$TMP/one.json" "$TMP/bad.json"
    run_ok "info on the single-line form" sa1b-rle info "$TMP/one.json"
    cmp -s "$TMP/.out" "$TMP/real"
    ok $? "same output as the pretty-printed file"
    run_status 1 "a corrupted mask" sa1b-rle info "$TMP/bad.json"
    is "$(wc -l <"$TMP/.out" | tr -d ' ')" 112 "the other 112 masks printed"
    line=$(grep -n '"counts"' "$TMP/bad.json" | sed -n 6p | cut -d: -f1)
    grep_ok "bad.json:$line: mask 5: counts: bad character '~'" "$TMP/.err" "error names line $line and mask 5"
    sa1b-rle info "$SHARED_DATA/snippets_other_real_annotations.jsonl" >"$TMP/snip"
    ok $? "info on the snippets"
    grep_ok '"id":523353737,"area":14773,.*"sa1b_bbox":\[866,946,132,199\]' "$TMP/snip" "sa_1 snippet"
else
    skip 11 "no real SA-1B data (../shared/data/sa1b-real beside the source tree, or \$SA1B_SHARED/data/sa1b-real), or no /usr/bin/python3"
fi
done_testing
