#!/bin/sh
# t1610-loader-rle.sh - the loader's batches from sa1b-shard's packed and rle
# output of the same tar are byte-identical (test-loader-rle compares them
# under several loader configurations): nearest and area resampling, several
# S/R (odd R, R = S), landscape, portrait and square images, and masks that
# the mask grid makes empty (small objects at R = 5) or full (shapes as large
# as a square image: big.tar at R = 5 has both, checked below); and a shard
# of source-size masks read at several R against packed shards made at them.
. "$top_srcdir/tests/test-lib.sh"
CMP="$BUILD/tests/test-loader-rle"
cd "$TMP" || exit 99
sa1b-synth -n 3 -W 320 -H 200 -m 25 -s 3 --quiet -o land.tar || exit 99
sa1b-synth -n 3 -W 180 -H 300 -m 25 -s 4 --quiet -o port.tar || exit 99
sa1b-synth -n 2 -W 256 -H 256 -m 30 -s 5 --quiet -o square.tar || exit 99
sa1b-synth -n 2 -W 256 -H 256 -m 20 -s 5 --sizes 1:1 --quiet -o big.tar || exit 99
for tar in land port square big; do
    for spec in "64 16 area" "48 13 nearest" "40 40 area" "96 5 nearest"; do
        set -- $spec
        o="--image-size $1 --mask-size $2 --mask-resample $3 --keep-empty-masks -q -j 2"
        # shellcheck disable=SC2086
        sa1b-shard $o -o p.shard $tar.tar && sa1b-shard $o --mask-format rle -o r.shard $tar.tar ||
            exit 99
        "$CMP" p.shard r.shard > cmp.tap
        ! grep -q '^not ok' cmp.tap && grep -q '^ok' cmp.tap
        ok $? "$tar S=$1 R=$2 $3: packed and rle batches identical ($(grep -c '^ok' cmp.tap) configurations)"
        grep '^not ok' cmp.tap | sed 's/^/# /'
    done
done
# one shard of source-size masks (sa1b-shard --mask-size source) serves every
# R: the loader resamples its runs, and its batches equal those of a packed
# shard made at that R with the same resampling
for tar in land port big; do
    sa1b-shard --image-size 64 --mask-size source -q -j 2 -o s.shard $tar.tar || exit 99
    for spec in "16 area" "13 nearest" "64 area" "5 nearest" "31 area"; do
        set -- $spec
        sa1b-shard --image-size 64 --mask-size "$1" --mask-resample "$2" --keep-empty-masks -q -j 2 -o p.shard $tar.tar ||
            exit 99
        "$CMP" p.shard s.shard "$1" "$2" > cmp.tap
        ! grep -q '^not ok' cmp.tap && grep -q '^ok' cmp.tap
        ok $? "$tar source-size masks at R=$1 $2 == packed at R=$1 ($(grep -c '^ok' cmp.tap) configurations)"
        grep '^not ok' cmp.tap | sed 's/^/# /'
    done
done
run_status 2 "a source-size shard without --mask-size: a usage error" sa1b-loadbench s.shard
grep_ok "source-size masks, and no mask size for the loader" "$TMP/.err" "... and says why"

# empty and full masks were among them
if [ -x /usr/bin/python3 ]; then
    sa1b-shard --image-size 96 --mask-size 5 --mask-resample nearest -q --mask-format rle --keep-empty-masks \
        -o e.shard big.tar || exit 99
    sa1b-inspect --rle e.shard | /usr/bin/python3 -c '
import json, sys
sys.path.insert(0, sys.argv[1])
import coco_rle
ones = [sum(coco_rle.runs(o["mask_rle"]["counts"])[1::2])
        for o in map(json.loads, sys.stdin) if o["type"] == "mask"]
print(sum(n == 0 for n in ones), sum(n == 25 for n in ones))' "$SRC/tests" > ef.txt
    read -r empty full < ef.txt
    [ "$empty" -gt 0 ] && [ "$full" -gt 0 ]
    ok $? "big.tar at R=5 has empty ($empty) and full ($full) masks"
else
    skip 1 "no /usr/bin/python3"
fi
done_testing
