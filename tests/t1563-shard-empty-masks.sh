#!/bin/sh
# t1563: masks that vanish at the mask resolution R (no set cell at R x R)
# are dropped by sa1b-shard before subsampling, counted in the summary and
# in every part's provenance; --keep-empty-masks keeps them and says so.
# Synthetic scenes of 600x400 at R = 16: about half of their masks vanish.
. "$top_srcdir/tests/test-lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "no /usr/bin/python3"
cd "$TMP" || exit 99
sa1b-synth --quiet -n 4 -W 600 -H 400 -m 40 -s 5 -o a.tar || exit 99
common="--image-size 64 --mask-size 16"

# per image of a shard: "image_id masks masks-without-a-set-cell" (the
# shard's own masks, as sa1b-inspect --rle gives them); plain Python
masks_of() {
    sa1b-inspect --rle "$1" | "$PY" -c '
import json, sys
sys.path.insert(0, sys.argv[1])
import coco_rle
n, e = {}, {}
for line in sys.stdin:
    d = json.loads(line)
    if d.get("type") != "mask":
        continue
    rs = coco_rle.runs(d["mask_rle"]["counts"])
    i = d["image_id"]
    n[i] = n.get(i, 0) + 1
    e[i] = e.get(i, 0) + (sum(rs[1::2]) == 0)
for i in sorted(n):
    print(i, n[i], e[i])' "$SRC/tests"
}
# a key of a shard's provenance (the first line of sa1b-inspect)
prov() {
    sa1b-inspect "$1" | head -1 | "$PY" -c '
import json, sys
p = json.loads(sys.stdin.readline())["provenance"]
for k in sys.argv[1].split("."):
    p = p.get(k) if isinstance(p, dict) else None
print(json.dumps(p))' "$2"
}
jkey() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$2"; }

run_ok "--keep-empty-masks: every mask kept" sa1b-shard --json-summary $common --keep-empty-masks -o keep.shard a.tar
cp .out keep.json
cp .err keep.err
total=$(jkey masks_kept keep.json)
empty=$(jkey masks_empty keep.json)
is "$(jkey masks_dropped keep.json)" 0 "--keep-empty-masks, no filter: nothing dropped"
[ "${empty:-0}" -gt 10 ] && [ "$empty" -lt "$total" ]
ok $? "the scenes have masks empty at R = 16 ($empty of $total)"
masks_of keep.shard >keep.masks
is "$(awk '{ s += $3 } END { print s }' keep.masks)" "$empty" "masks_empty counts the kept masks without a set cell"
is "$(prov keep.shard options.keep_empty_masks)" true "the provenance records --keep-empty-masks"
is "$(prov keep.shard masks_empty_kept)" "$empty" "and how many such masks the shard holds"
grep_ok "^sa1b-shard: 4 images, $total masks kept \($empty of them empty at R\), 0 dropped, " keep.err \
    "the summary line counts them among the kept"

run_ok "default: masks empty at R dropped" sa1b-shard --json-summary $common -o def.shard a.tar
cp .out def.json
grep_ok "^sa1b-shard: 4 images, $((total - empty)) masks kept, $empty dropped \($empty of them empty at R\), 0 samples" \
    .err "the summary line counts them"
is "$(jkey masks_empty def.json)" "$empty" "--json-summary: masks_empty"
is "$(jkey masks_dropped def.json)" "$empty" "they are the masks dropped"
is "$(jkey masks_kept def.json)" "$((total - empty))" "the others kept"
masks_of def.shard >def.masks
is "$(awk '{ s += $3 } END { print s + 0 }' def.masks)" 0 "no mask of the shard lacks a set cell"
is "$(prov def.shard options.keep_empty_masks)" false "the provenance says they were dropped"
is "$(prov def.shard masks_empty_dropped)" "$empty" "and how many"

# --max-masks counts masks that are there: k = the fewest non-empty masks
# of an image, so that every image can give k
k=$(awk 'NR == 1 || $2 < m { m = $2 } END { print m }' def.masks)
[ "${k:-0}" -ge 2 ] || exit 99
for s in random quality size-balanced kmeans; do
    sa1b-shard -q $common --max-masks "$k" --strategy $s -o "max-$s.shard" a.tar || exit 99
    masks_of "max-$s.shard" >"max-$s.masks"
    is "$(awk -v k="$k" '$2 != k || $3 != 0 { bad++ } END { print NR, bad + 0 }' "max-$s.masks")" "4 0" \
        "--max-masks $k --strategy $s: every image keeps $k masks, none empty at R"
done
# an image with fewer: all its non-empty masks
sa1b-shard -q $common --max-masks 1000 -o big.shard a.tar || exit 99
sa1b-inspect --rle big.shard | grep '"type": "mask"' | sed 's/"file": "[^"]*", //' >big.rle
sa1b-inspect --rle def.shard | grep '"type": "mask"' | sed 's/"file": "[^"]*", //' >def.rle
cmp -s big.rle def.rle
ok $? "--max-masks above the count: every non-empty mask, as without it"

# parts of a split input: each part's provenance counts its own
run_ok "--max-images 3: two parts" sa1b-shard -q --json-summary $common --max-images 3 -o parts a.tar
a0=$(prov parts/a-00000.shard masks_empty_dropped)
a1=$(prov parts/a-00001.shard masks_empty_dropped)
is "$((a0 + a1))" "$empty" "the parts' counts add up to the input's ($a0 + $a1)"
[ "$a0" -gt 0 ] && [ "$a1" -gt 0 ]
ok $? "both parts count theirs"

# nearest resampling and run-length masks drop by the cells they store
for opt in "--mask-resample nearest" "--mask-format rle"; do
    sa1b-shard -q --json-summary $common $opt --keep-empty-masks -o k2.shard a.tar >k2.json || exit 99
    sa1b-shard -q --json-summary $common $opt -o d2.shard a.tar >d2.json || exit 99
    e2=$(jkey masks_empty k2.json)
    is "$(masks_of k2.shard | awk '{ s += $3 } END { print s }') $(jkey masks_empty d2.json) $(jkey masks_kept d2.json)" \
        "$e2 $e2 $(( $(jkey masks_kept k2.json) - e2 ))" "$opt: the kept masks without a cell are those dropped"
    is "$(masks_of d2.shard | awk '{ s += $3 } END { print s + 0 }')" 0 "$opt: none left in the shard"
done

# source-size masks have no R: only masks without any pixel go
run_ok "--mask-size source" sa1b-shard -q --json-summary --image-size 64 --mask-size source -o src.shard a.tar
is "$(jkey masks_kept .out) $(jkey masks_empty .out)" "$total 0" "--mask-size source keeps every mask with a pixel"

# --skip-existing: a shard made with the other choice is not up to date
run_ok "--skip-existing over the --keep-empty-masks shard" sa1b-shard -q --json-summary $common --skip-existing \
    -o keep.shard a.tar
is "$(jkey inputs_up_to_date .out) $(jkey masks_empty .out)" "0 $empty" "it is remade, the masks dropped"
cmp -s keep.shard def.shard
ok $? "into the default's shard"
done_testing
