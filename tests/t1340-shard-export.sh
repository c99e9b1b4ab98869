#!/bin/sh
# t1340-shard-export.sh - sa1b-export: the PNG decodes, has the right size,
# pixels under a mask carry its palette colour blended as sa1b-export(1)
# defines, pixels outside masks keep the image; raw and jpeg payloads, --id,
# --grid, JPEG output, usage and error statuses.
. "$top_srcdir/tests/test-lib.sh"
GEN="$BUILD/tests/test-shard-gen"
cd "$TMP" || exit 99

"$GEN" gen raw.shard -n 6 -s 96 -r 24 -m 6 --seed 5 || exit 99
"$GEN" gen jpeg.shard -n 4 -s 96 -r 24 -m 6 -f jpeg --seed 6 || exit 99
for i in 0 2 4; do
    run_ok "export raw image $i" sa1b-export raw.shard --index $i -o raw$i.png
    run_ok "raw image $i: size and mask colours" "$GEN" check-export raw$i.png raw.shard $i
done
run_ok "export a jpeg-payload image" sa1b-export jpeg.shard -i 2 -o jpeg2.png
run_ok "jpeg image: size and mask colours" "$GEN" check-export jpeg2.png jpeg.shard 2
run_ok "export by --id" sa1b-export raw.shard --id 106 -o byid.png
cmp -s byid.png raw2.png
ok $? "--id 106 is the image at index 2"
run_ok "export as JPEG" sa1b-export raw.shard -i 0 -q 80 -o out.jpg
head -c 3 out.jpg | od -An -tx1 | tr -d ' \n' > magic.txt
is "$(cat magic.txt)" "ffd8ff" "the .jpg output is a JPEG"
run_ok "a contact sheet" sa1b-export raw.shard --grid 5 --tile 32 -o sheet.png
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
    is "$(/usr/bin/python3 -c 'from PIL import Image; print(Image.open("sheet.png").size)')" \
        "(112, 76)" "sheet: 3 columns x 2 rows of 32 px with 4 px gaps"
else
    skip 1 "no PIL for /usr/bin/python3"
fi
run_ok "fills only" sa1b-export raw.shard --no-outlines --no-points -a 1 -o plain.png
ls "$TMP" | grep -q 'tmp-'
[ $? -ne 0 ]
ok $? "no temporary files left"

run_status 1 "index past the end: status 1" sa1b-export raw.shard -i 6 -o x.png
grep_ok "no image 6 \(the shard has 6\)" "$TMP/.err" "index past the end: message"
run_status 1 "unknown id: status 1" sa1b-export raw.shard --id 99999 -o x.png
cp raw.shard bad.shard
payload=$(sa1b-inspect bad.shard | grep '"index": 1,' | sed 's/.*"image_offset": \([0-9]*\).*/\1/')
"$GEN" flip bad.shard $((payload + 5)) 2
run_status 1 "damaged payload: status 1" sa1b-export bad.shard -i 1 -o x.png
grep_ok "payload at offset $payload: CRC32C" "$TMP/.err" "damaged payload: message"
[ ! -e x.png ]
ok $? "no output on failure"
run_status 3 "missing shard: status 3" sa1b-export missing.shard -o x.png
run_status 2 "no output: usage" sa1b-export raw.shard
run_status 2 "bad extension: usage" sa1b-export raw.shard -o x.gif
run_status 2 "--index with --id: usage" sa1b-export raw.shard -i 1 --id 2 -o x.png
run_status 2 "bad --alpha: usage" sa1b-export raw.shard -a 2 -o x.png
run_status 2 "missing value: usage" sa1b-export raw.shard -o
run_ok "--help" sa1b-export --help
grep_ok '^Usage: sa1b-export' "$TMP/.out" "--help on stdout"
done_testing
