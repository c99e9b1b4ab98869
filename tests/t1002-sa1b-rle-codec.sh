#!/bin/sh
# t1002-sa1b-rle-codec.sh - sa1b-rle decode/encode round trips through raw,
# PGM and PNG, resizing, and iou/merge on masks with hand-computed answers.
. "$top_srcdir/tests/test-lib.sh"

# 3x4, row-major: 0100 / 0110 / 0010 -> runs 3,2,2,2,3 -> "32201"
run_ok "decode raw" sa1b-rle decode --size 3x4 --counts 32201
is "$(od -An -tu1 <"$TMP/.out" | tr -s ' ' | sed 's/^ //')" "0 1 0 0 0 1 1 0 0 0 1 0" "raw bytes row-major"
cp "$TMP/.out" "$TMP/m.raw"
is "$(sa1b-rle encode --size 3x4 <"$TMP/m.raw")" 32201 "encode raw"
is "$(sa1b-rle encode --size 3x4 --json "$TMP/m.raw")" '{"size":[3,4],"counts":"32201"}' "encode --json from a file"
run_status 1 "raw input of the wrong size" sa1b-rle encode --size 4x4 "$TMP/m.raw"

run_ok "decode pgm" sa1b-rle decode --size 3x4 --counts 32201 --pgm -o "$TMP/m.pgm"
is "$(head -c 11 "$TMP/m.pgm" | tr '\n' ' ')" "P5 4 3 255 " "PGM header: width height"
is "$(sa1b-rle encode --pgm <"$TMP/m.pgm")" 32201 "encode pgm"
is "$(sa1b-rle encode --pgm --size 3x4 <"$TMP/m.pgm")" 32201 "encode pgm with a matching --size"
run_status 1 "pgm with another --size" sa1b-rle encode --pgm --size 4x3 "$TMP/m.pgm"
printf 'P5\n4 3\n255\nab' >"$TMP/short.pgm"
run_status 1 "short PGM" sa1b-rle encode --pgm "$TMP/short.pgm"

run_ok "decode png" sa1b-rle decode --size 3x4 --counts 32201 --png -o "$TMP/m.png"
is "$(head -c 4 "$TMP/m.png" | tail -c 3)" PNG "PNG signature"
is "$(sa1b-rle encode --png <"$TMP/m.png")" 32201 "encode png"
run_status 1 "png decoder refuses a PGM" sa1b-rle encode --png "$TMP/m.pgm"
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
    /usr/bin/python3 -c '
import sys
from PIL import Image
im = Image.open(sys.argv[1]); assert im.size == (4, 3) and im.mode == "L", (im.size, im.mode)
assert list(im.getdata()) == [0,255,0,0, 0,255,255,0, 0,0,255,0], list(im.getdata())' "$TMP/m.png"
    ok $? "PIL reads the PNG as 4x3 grey 0/255"
    /usr/bin/python3 -c '
import sys
from PIL import Image
Image.new("RGB", (5, 2), (0, 0, 0)).save(sys.argv[1])
im = Image.open(sys.argv[1]); im.putpixel((1, 0), (200, 10, 10)); im.save(sys.argv[1])' "$TMP/rgb.png"
    is "$(sa1b-rle encode --png "$TMP/rgb.png")" 217 "RGB PNG: nonzero grey is foreground"
else
    skip 2 "no python3 PIL"
fi

# a larger random mask through every format
/usr/bin/python3 -c '
import random, sys
random.seed(5)
h, w = 37, 53
m = bytearray(h * w)
for _ in range(6):
    cy, cx, r = random.randrange(h), random.randrange(w), random.randrange(2, 12)
    for y in range(h):
        for x in range(w):
            if (y - cy) ** 2 + (x - cx) ** 2 <= r * r: m[y * w + x] = 1
open(sys.argv[1], "wb").write(bytes(m))' "$TMP/big.raw" 2>/dev/null || head -c 1961 /dev/urandom | tr '\000-\377' '\000\001\000\001\000\001\000\001' >"$TMP/big.raw"
c=$(sa1b-rle encode --size 37x53 <"$TMP/big.raw")
ok $? "encode 37x53"
sa1b-rle decode --size 37x53 --counts "$c" >"$TMP/big2.raw" && cmp -s "$TMP/big.raw" "$TMP/big2.raw"
ok $? "37x53 raw round trip"
sa1b-rle decode --size 37x53 --counts "$c" --png -o "$TMP/big.png" && is "$(sa1b-rle encode --png "$TMP/big.png")" "$c" "37x53 png round trip"
sa1b-rle decode --size 37x53 --counts "$c" --pgm >"$TMP/big.pgm" && is "$(sa1b-rle encode --pgm "$TMP/big.pgm")" "$c" "37x53 pgm round trip"
sa1b-rle decode --size 37x53 --counts "$c" --resize 37x53 >"$TMP/same.raw" && cmp -s "$TMP/same.raw" "$TMP/big.raw"
ok $? "nearest resize to the same size is the identity"
sa1b-rle decode --size 37x53 --counts "$c" --resize 37x53 --mode area >"$TMP/same.raw" && cmp -s "$TMP/same.raw" "$TMP/big.raw"
ok $? "area resize to the same size is the identity"

# resizing a 4x4 with its top-left 2x2 set: 2x2 nearest and area, 1x1 area
run_ok "decode --resize" sa1b-rle decode --size 4x4 --counts 02208 --resize 2x2
is "$(od -An -tu1 <"$TMP/.out" | tr -s ' ' | sed 's/^ //')" "1 0 0 0" "nearest 2x2"
sa1b-rle decode --size 4x4 --counts 02208 --resize 1x1 --mode area --coverage >"$TMP/o"
is "$(od -An -tu1 <"$TMP/o" | tr -d ' ')" 64 "area coverage of a quarter: round(255/4) = 64"
sa1b-rle decode --size 4x4 --counts 02208 --resize 1x1 --mode area >"$TMP/o"
is "$(od -An -tu1 <"$TMP/o" | tr -d ' ')" 0 "a quarter is below one half"
run_status 1 "decode a malformed string" sa1b-rle decode --size 3x4 --counts '0<~'
grep_ok "bad character '~' at offset 2" "$TMP/.err" "decode names the bad character"
run_ok "decode -o into a file" sa1b-rle decode --size 3x4 --counts 32201 -o "$TMP/o.raw"
is "$(ls "$TMP" | grep -c 'tmp')" 0 "no temporary file left behind"
run_status 3 "decode into a missing directory" sa1b-rle decode --size 3x4 --counts 32201 -o "$TMP/no/such/file"

# iou and merge: r = 32201 (area 4), g = column 1 = 327 (area 2)
is "$(sa1b-rle iou 3x4:32201 3x4:327)" 0.5 "iou = 2/4"
is "$(sa1b-rle iou --crowd 3x4:32201 3x4:327)" 0.5 "crowd iou = 2/|A| = 2/4"
is "$(sa1b-rle iou --crowd 3x4:327 '{"size":[3,4],"counts":"32201"}')" 1 "crowd iou = 2/2, JSON argument"
is "$(sa1b-rle iou 3x4:0\< 3x4:\<)" 0 "iou with an empty mask"
is "$(sa1b-rle iou 3x4:32201 3x4:0\<)" 0.3333333333333333 "iou 4/12 printed to round trip"
run_status 1 "iou of different sizes" sa1b-rle iou 3x4:32201 4x3:\<
run_status 1 "iou of a malformed mask" sa1b-rle iou 3x4:3221 3x4:327
is "$(sa1b-rle merge --union 3x4:327 3x4:32201 3x4:\<)" '{"size":[3,4],"counts":"32201"}' "union"
is "$(sa1b-rle merge --intersect 3x4:32201 '{"size":[3,4],"counts":"327"}')" '{"size":[3,4],"counts":"327"}' "intersection"
is "$(sa1b-rle merge --intersect 3x4:32201 3x4:\<)" '{"size":[3,4],"counts":"<"}' "intersection with nothing"
is "$(sa1b-rle merge --union 3x4:32201)" '{"size":[3,4],"counts":"32201"}' "merge of one mask"
run_status 1 "merge of different sizes" sa1b-rle merge --union 3x4:32201 4x3:\<
done_testing
