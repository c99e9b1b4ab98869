#!/bin/sh
# t1205-synth-codec.sh - sa1b-synth's masks through the project's own codec
# (sa1b-rle): every counts string decodes, area and SA-1B bbox agree with
# the JSON, and decoding then re-encoding gives back the same string (the
# writer's runs are canonical).  Needs no Python.
. "$top_srcdir/tests/test-lib.sh"

command -v sa1b-rle >/dev/null 2>&1 || skip_all "sa1b-rle not built"

run_ok "tar" sa1b-synth -n 3 -W 200 -H 150 -m 25 -s 21 -o "$TMP/c.tar"
mkdir "$TMP/x" && (cd "$TMP/x" && tar xf ../c.tar)
ok $? "extracts"
for n in 1 2 3; do
    j="$TMP/x/sa_$n.json"
    run_ok "sa_$n: sa1b-rle info decodes every mask" sa1b-rle info "$j"
    cp "$TMP/.out" "$TMP/info"
    is "$(wc -l <"$TMP/info" | tr -d ' ')" "$(grep -o '"counts"' "$j" | wc -l | tr -d ' ')" \
        "sa_$n: one line per annotation"
    is "$(grep -o '"area":[0-9]*' "$TMP/info" | sed 's/"area"://')" \
        "$(grep -o '"area": [0-9]*' "$j" | sed 's/"area": //')" "sa_$n: areas agree"
    is "$(grep -o '"sa1b_bbox":\[[^]]*\]' "$TMP/info" | sed 's/"sa1b_bbox"://')" \
        "$(grep -o '"bbox": \[[^]]*\]' "$j" | sed 's/"bbox": //; s/\.0//g; s/ //g')" \
        "sa_$n: SA-1B bboxes agree"
    is "$(grep -o '"id":[0-9]*' "$TMP/info" | sed 's/"id"://')" \
        "$(grep -o '"id": [0-9]*' "$j" | sed 's/"id": //')" "sa_$n: ids agree"
done

# decode and re-encode the first masks of sa_1: the same strings
i=0
grep -o '"counts": "[^"]*"' "$TMP/x/sa_1.json" | sed 's/"counts": "//; s/"$//; s/\\\\/\\/g' | head -5 |
while IFS= read -r c; do
    i=$((i + 1))
    sa1b-rle decode --size 150x200 --counts "$c" --raw -o "$TMP/m.raw" &&
        sa1b-rle encode --size 150x200 --raw "$TMP/m.raw" >"$TMP/re"
    [ "$(cat "$TMP/re")" = "$c" ]
    ok $? "mask $i: decode then encode gives the same counts"
done >"$TMP/tap"
cat "$TMP/tap"
n=$(grep -c '^ok' "$TMP/tap")
test_n=$((test_n + $(wc -l <"$TMP/tap")))
is "$n" 5 "five masks round-trip"

done_testing
