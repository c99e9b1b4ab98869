#!/bin/sh
# t1350-shard-rle.sh - run-length masks (format version 2) through the tools,
# and the version-1 shards written before version 2 existed:
# tests/data/v1-{jpeg,raw}.shard were made from tests/data/v1-input.tar (a
# sa1b-synth tar, saved as v1.tar) by the sa1b-shard of commit 848734e with
#   --image-size 128 --mask-size 32 --image-format jpeg
#   --image-size 32 --mask-size 12 --mask-resample nearest
# They still open, verify, inspect and export; today's sa1b-shard (packed,
# the default; for JPEG with --jpeg-huffman standard, the tables of that
# commit) rewrites them byte for byte, and with its default optimized
# Huffman tables into fewer bytes of the same pixels; --mask-format rle gives version-2
# shards that verify and hold the same masks (sa1b-inspect --rle, exported
# overlays), in fewer bytes; --mask-size source keeps the annotations' own
# runs, which the tools read.  That commit kept masks that vanish at R:
# today's sa1b-shard does so with --keep-empty-masks.
. "$top_srcdir/tests/test-lib.sh"
cd "$TMP" || exit 99
D="$SRC/tests/data"
cp "$D/v1-input.tar" v1.tar || exit 99

# (--keep-empty-masks: that commit kept the masks that vanish at R)
set -- "jpeg:--image-size 128 --mask-size 32 --image-format jpeg --keep-empty-masks --jpeg-huffman standard" \
       "raw:--image-size 32 --mask-size 12 --mask-resample nearest --keep-empty-masks"
for spec in "$@"; do
    k=${spec%%:*}
    opts=${spec#*:}
    fx="$D/v1-$k.shard"
    run_ok "v1 fixture ($k) verifies" sa1b-verify "$fx"
    run_ok "v1 fixture ($k) inspects" sa1b-inspect --rle "$fx"
    grep_ok '"version": 1,.*"mask_format": "packed"' "$TMP/.out" "v1 fixture ($k): version 1, packed"
    run_ok "v1 fixture ($k) exports" sa1b-export "$fx" -i 1 -o "fx-$k.png"

    # shellcheck disable=SC2086
    run_ok "packed ($k)" sa1b-shard -q -j 2 $opts -o "packed-$k.shard" v1.tar
    # byte-identical but for the provenance, which records more since
    # (issue 19: the input's size, CRC32C and clean end; issue 39: the
    # masks empty at R), and the offsets that its length moves (by a
    # multiple of 64, all of them alike): the same header fields, image and
    # mask records, and the same bytes from the first image up to the index
    # table (which holds the offsets)
    body() { sa1b-inspect --rle "$1" | sed 's/"file": "[^"]*", //; s/, "file_size": [0-9]*//; s/, "provenance": .*}$/}/'; }
    offsets() { grep -o '"[a-z_]*_offset": [0-9]*' "$1" | sed 's/.*: //'; }
    strip() { sed 's/, "[a-z_]*_offset": [0-9]*//g' "$1"; }
    body "$fx" > fx.jsonl
    body "packed-$k.shard" > pk.jsonl
    o=$(sed -n 's/.*"image_offset": \([0-9]*\).*/\1/p' fx.jsonl | head -1)
    o2=$(sed -n 's/.*"image_offset": \([0-9]*\).*/\1/p' pk.jsonl | head -1)
    x=$(head -1 fx.jsonl | sed -n 's/.*"index_offset": \([0-9]*\).*/\1/p')
    offsets fx.jsonl | awk -v d=$((o2 - o)) '{ print $1 + d }' > fx.off
    offsets pk.jsonl > pk.off
    [ -n "$o" ] && [ -n "$o2" ] && [ -n "$x" ] && [ $(((o2 - o) % 64)) -eq 0 ] && cmp -s fx.off pk.off &&
        strip fx.jsonl > fx.body && strip pk.jsonl > pk.body && cmp -s fx.body pk.body &&
        cmp -s -i "$o:$o2" -n $((x - o)) "$fx" "packed-$k.shard"
    ok $? "packed ($k) is byte-identical to the v1 fixture but for the provenance (and the offsets it moves)"
    if [ "$k" = jpeg ]; then
        # the default, optimized Huffman tables: the same pixels in fewer bytes
        # shellcheck disable=SC2086
        run_ok "packed (jpeg, optimized tables)" sa1b-shard -q -j 2 ${opts%--jpeg-huffman*} \
            -o "opt-$k.shard" v1.tar
        sa1b-inspect "opt-$k.shard" | head -1 > head.json
        grep_ok '"jpeg_huffman": "optimized"' head.json "the provenance records optimized tables"
        same=0
        for i in 0 1; do
            sa1b-export "opt-$k.shard" -i $i -a 0 --no-outlines --no-points -o "opt-$i.png" &&
                sa1b-export "$fx" -i $i -a 0 --no-outlines --no-points -o "fx-$i.png" &&
                cmp -s "opt-$i.png" "fx-$i.png" && same=$((same + 1))
        done
        is "$same" 2 "optimized tables: the v1 fixture's pixels, both images"
        sum_img() { sa1b-inspect "$1" | sed -n 's/.*"image_bytes": \([0-9]*\).*/\1/p' |
            awk '{ s += $1 } END { print s + 0 }'; }
        [ "$(sum_img "opt-$k.shard")" -lt "$(sum_img "$fx")" ]
        ok $? "optimized tables: fewer image bytes ($(sum_img "opt-$k.shard") < $(sum_img "$fx"))"
        run_ok "optimized tables verify" sa1b-verify "opt-$k.shard"
    fi
    # shellcheck disable=SC2086
    run_ok "rle ($k)" sa1b-shard -q -j 2 $opts --mask-format rle -o "rle-$k.shard" v1.tar
    run_ok "rle ($k) verifies" sa1b-verify "rle-$k.shard"
    sa1b-inspect "rle-$k.shard" | head -1 > head.json
    grep_ok '"version": 2,.*"mask_bytes": 0, "mask_stride": 0, "mask_format": "rle"' head.json \
        "rle ($k): version 2, rle, no stride"
    grep_ok '"mask_format": "rle"' head.json "rle ($k): the provenance records --mask-format rle"
    sa1b-inspect --rle "packed-$k.shard" | grep "\"type\": \"mask\"" | sed 's/"file": "[^"]*"//' > p.jsonl
    sa1b-inspect --rle "rle-$k.shard" | grep "\"type\": \"mask\"" | sed 's/"file": "[^"]*"//' > r.jsonl
    cmp -s p.jsonl r.jsonl && [ "$(grep -c mask_rle r.jsonl)" -eq 24 ]
    ok $? "rle ($k): the same 24 masks and metadata as packed"
    sa1b-export "rle-$k.shard" -i 1 -o "rle-$k.png" && cmp -s "rle-$k.png" "fx-$k.png"
    ok $? "rle ($k): the exported overlay equals the v1 fixture's"
    [ "$(wc -c < "rle-$k.shard")" -lt "$(wc -c < "packed-$k.shard")" ]
    ok $? "rle ($k) is smaller than packed"
done

# --mask-size source: each annotation's own runs, the loader picks R
run_ok "source-size masks" sa1b-shard -q --image-size 32 --mask-size source -o src.shard v1.tar
run_ok "source-size masks verify" sa1b-verify src.shard
sa1b-inspect src.shard | head -1 > head.json
grep_ok '"version": 2, "image_size": 32, "mask_size": 0,.*"mask_format": "source"' head.json \
    "source: version 2, mask size 0, mask format source"
if [ -x /usr/bin/python3 ]; then
    mkdir -p x && (cd x && tar xf ../v1.tar) || exit 99
    sa1b-inspect --rle src.shard | /usr/bin/python3 -c '
import glob, json, sys
want = {}
for f in glob.glob(sys.argv[1] + "/*.json"):
    for a in json.load(open(f))["annotations"]:
        want[a["id"]] = (a["segmentation"]["size"], a["segmentation"]["counts"])
got = [o for o in map(json.loads, sys.stdin) if o["type"] == "mask"]
same = sum(want[o["id"]] == (o["mask_rle"]["size"], o["mask_rle"]["counts"]) for o in got)
print(len(got), same)' x > same.txt
    read -r n same < same.txt
    [ "$n" -eq 24 ] && [ "$same" -eq 24 ]
    ok $? "source: inspect --rle gives the annotations' own COCO RLE ($same of $n)"
else
    skip 1 "no /usr/bin/python3"
fi
sa1b-shard -q --image-size 32 --mask-size 32 --keep-empty-masks -o p32.shard v1.tar || exit 99
sa1b-export src.shard -i 1 -o src.png && sa1b-export p32.shard -i 1 -o p32.png && cmp -s src.png p32.png
ok $? "source: exported at S (area) as a packed shard with R = S"
run_status 2 "--mask-size source with --mask-format packed: usage error" \
    sa1b-shard --mask-size source --mask-format packed -o y.shard v1.tar
grep_ok "mask-size source stores runs" "$TMP/.err" "... and says why"

sa1b-inspect --summary rle-jpeg.shard > sum.txt
grep_ok '^format +jpeg 128x128, masks 32x32 as runs' sum.txt "summary: masks as runs"
grep_ok '^bytes per image .*\(image .*, masks .*, other .*\)' sum.txt "summary: bytes by part"
run_status 2 "--mask-format bogus: usage error" sa1b-shard --mask-format bogus -o x.shard v1.tar
grep_ok "'bogus' is not packed or rle" "$TMP/.err" "--mask-format bogus: message"
run_status 2 "--jpeg-huffman bogus: usage error" sa1b-shard --jpeg-huffman bogus -o x.shard v1.tar
grep_ok "--jpeg-huffman: 'bogus' is not optimized or standard" "$TMP/.err" "--jpeg-huffman bogus: message"

# a flipped byte inside the runs: the masks CRC names the block
cp rle-raw.shard bad.shard
mofs=$(sa1b-inspect bad.shard | grep '"index": 1,' | sed 's/.*"masks_offset": \([0-9]*\).*/\1/')
printf '\377' | dd of=bad.shard bs=1 seek=$((mofs + 1)) conv=notrunc 2>/dev/null
run_status 1 "damaged runs: sa1b-verify status 1" sa1b-verify bad.shard
grep_ok "image 1 \(id 2\) masks at offset $mofs: CRC32C" "$TMP/.err" "damaged runs: the masks block named"
done_testing
