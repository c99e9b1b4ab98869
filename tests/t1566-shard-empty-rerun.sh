#!/bin/sh
# t1566: a shard made before sa1b-shard dropped the masks empty at R (its
# options lack "keep_empty_masks") holds them all, as one of
# --keep-empty-masks does: a --skip-existing rerun with --keep-empty-masks
# leaves it alone; one without shards it again, saying why in one line.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
[ -x /usr/bin/python3 ] || skip_all "no /usr/bin/python3"
cd "$TMP" || exit 99
sa1b-synth --quiet -n 4 -W 600 -H 400 -m 40 -s 5 -o a.tar || exit 99
opts="--image-size 64 --mask-size 16 --skip-existing"
sa1b-shard -q $opts --keep-empty-masks -o out/ a.tar || exit 99
/usr/bin/python3 "$SRC/tests/shard_restamp.py" --before-empty out/a.shard || exit 99
cp out/a.shard old.shard
sa1b-inspect old.shard | head -1 >prov
grep -q keep_empty_masks prov && { echo "Bail out! the restamp left keep_empty_masks"; exit 99; }
run_ok "the old shard verifies" sa1b-verify -q old.shard

sa1b-shard $opts --keep-empty-masks -o out/ a.tar 2>err1
is "$?" "0" "a rerun with --keep-empty-masks"
grep_ok "^sa1b-shard: 'a.tar': complete output exists, skipped$" err1 "leaves the old shard alone"
cmp -s old.shard out/a.shard
is "$?" "0" "byte for byte"

sa1b-shard $opts -o out/ a.tar 2>err2
is "$?" "0" "a rerun without it"
grep_ok "^sa1b-shard: 'a.tar': its shard keeps the masks empty at R \(made before sa1b-shard dropped them; --keep-empty-masks keeps such a shard\): sharding it again$" \
    err2 "shards it again, saying why"
is "$(grep -c "'a.tar'" err2)" "1" "in one line"
sa1b-inspect out/a.shard | head -1 | grep -q '"keep_empty_masks": false'
is "$?" "0" "the new shard records that it dropped them"

cp old.shard out/a.shard
sa1b-shard $opts --mask-size 32 -o out/ a.tar 2>err3
grep_ok "^sa1b-shard: 'a.tar': its shard was made with other options: sharding it again$" err3 \
    "other options besides: the usual line"
done_testing
