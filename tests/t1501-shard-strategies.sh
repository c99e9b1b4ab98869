#!/bin/sh
# Each strategy keeps exactly the masks its definition in sa1b-shard(1)
# (SUBSAMPLING) selects, checked by an independent Python re-implementation
# (masks with no set cell at R = 16 are no candidates: dropped by default).
. "$top_srcdir/tests/test-lib.sh"
PY=/usr/bin/python3
$PY -c 'import numpy' 2>/dev/null || skip_all "python3-numpy missing"

sa1b-synth --quiet --images 3 --width 300 --height 200 --masks 30 --seed 9 -o "$TMP/a.tar" || exit 99
for s in random quality size-balanced kmeans; do
    for k in 5 17; do
        sa1b-shard -q --image-size 64 --max-masks $k --strategy $s --seed 21 -o "$TMP/$s.shard" "$TMP/a.tar"
        sa1b-inspect --masks "$TMP/$s.shard" > "$TMP/$s.jsonl"
        $PY "$SRC/tests/shard_check.py" select "$TMP/a.tar" "$TMP/$s.jsonl" $k $s 21 R=16 > "$TMP/check.tap"
        ok $? "$s k=$k keeps exactly the documented selection"
        grep '^not ok' "$TMP/check.tap" | sed 's/^/# /'
    done
done
sa1b-shard -q --image-size 64 --min-area 500 --min-iou 0.9 --min-stability 0.9 --max-masks 4 --strategy quality \
    -o "$TMP/f.shard" "$TMP/a.tar"
sa1b-inspect --masks "$TMP/f.shard" > "$TMP/f.jsonl"
$PY "$SRC/tests/shard_check.py" select "$TMP/a.tar" "$TMP/f.jsonl" 4 quality 0 500 0.9 0.9 R=16 > "$TMP/check.tap"
ok $? "filters then quality keep the documented masks"
sa1b-shard -q --image-size 64 --max-masks 5 --strategy random --seed 1 -o "$TMP/r1.shard" "$TMP/a.tar"
sa1b-shard -q --image-size 64 --max-masks 5 --strategy random --seed 2 -o "$TMP/r2.shard" "$TMP/a.tar"
! cmp -s "$TMP/r1.shard" "$TMP/r2.shard"
ok $? "another seed selects other masks"
done_testing
