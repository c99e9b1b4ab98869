#!/bin/sh
# t1556: a split set that lacks its last part is incomplete: each part's
# provenance says whether it is the input's last (last_part), so a set
# whose highest part says false is redone by --skip-existing and is not
# kept from a truncated input's shard.  The images of an input whose shard
# was not put in place (a complete output kept) are not counted as written.
# Before: "complete output exists, skipped" and "complete output kept" for
# a set without its last part.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
sa1b-synth --quiet -n 6 -W 120 -H 80 -m 4 -o "$TMP/a.tar" || exit 99
S="sa1b-shard -j 1 --image-size 32"
$S -q --max-images 2 -o "$TMP/c3" "$TMP/a.tar" || exit 99
sa1b-inspect "$TMP/c3/a-00001.shard" >"$TMP/p1" 2>&1
grep_ok '"last_part": *false' "$TMP/p1" "a part before the last says it is not the last"
sa1b-inspect "$TMP/c3/a-00002.shard" >"$TMP/p2" 2>&1
grep_ok '"last_part": *true' "$TMP/p2" "the last part says it is"
rm "$TMP/c3/a-00002.shard"
run_ok "--skip-existing over a set without its last part" $S --skip-existing --max-images 2 -o "$TMP/c3" "$TMP/a.tar"
grep_ok "^sa1b-shard: '$TMP/a.tar': its set of shards lacks its last part \(part 1 is not the last\): sharding it again$" \
    "$TMP/.err" "it is redone, one line says why"
is "$(files "$TMP/c3")" "a-00000.shard a-00001.shard a-00002.shard " "the set is whole again"

# a truncated input over a set without its last part replaces it
rm "$TMP/c3/a-00002.shard"
mkdir "$TMP/cut" && head -c $(($(stat -c %s "$TMP/a.tar") * 2 / 3)) "$TMP/a.tar" >"$TMP/cut/a.tar"
run_status 1 "a truncated a.tar over it: exit 1" $S --max-images 2 -o "$TMP/c3" "$TMP/cut/a.tar"
grep -q "complete output kept" "$TMP/.err"
ok $((!$?)) "the incomplete set is not kept as complete"
# a complete set is kept, and its images are not counted as written
$S -q --max-images 2 -o "$TMP/c4" "$TMP/a.tar" || exit 99
run_status 1 "a truncated a.tar over a complete set: exit 1" $S --max-images 2 -o "$TMP/c4" "$TMP/cut/a.tar"
grep_ok "complete output kept" "$TMP/.err" "it is kept"
grep_ok "^sa1b-shard: 0 images, 0 masks kept, .* 0 shards written" "$TMP/.err" "the summary counts none of its images"
done_testing
