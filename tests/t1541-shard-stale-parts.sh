#!/bin/sh
# t1541: after a run, the output set of an input is exactly what that run
# wrote.  Parts of an earlier run past the new ones (fewer parts: another
# --max-images, or a smaller input) and the other form (name.shard against
# name-NNNNN.shard) are removed when the new set is put in place, each with
# one line; files that are not shards of sa1b-shard, and shards of another
# input whose names only look like parts, are left alone.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
sa1b-synth --quiet -n 6 -W 120 -H 80 -m 4 -o "$TMP/a.tar" || exit 99
sa1b-synth --quiet -n 3 -W 120 -H 80 -m 4 -s 5 --first-id 100 -o "$TMP/small.tar" || exit 99
opts="-q -j 2 --image-size 32"

sa1b-shard $opts --max-images 2 -o "$TMP/mi" "$TMP/a.tar" || exit 99
is "$(files "$TMP/mi")" "a-00000.shard a-00001.shard a-00002.shard " "--max-images 2: three parts"
run_ok "again with --max-images 3" sa1b-shard -j 2 --image-size 32 --max-images 3 -o "$TMP/mi" "$TMP/a.tar"
is "$(files "$TMP/mi")" "a-00000.shard a-00001.shard " "two parts, the third of the earlier run removed"
grep_ok "^sa1b-shard: removed '$TMP/mi/a-00002.shard', left from an earlier run of this output$" "$TMP/.err" \
    "one line says so"
is "$(shard_ids "$TMP"/mi/*.shard)" "1 2 3 4 5 6 " "every image once"
run_ok "--skip-existing: up to date" sa1b-shard $opts --skip-existing --max-images 3 -o "$TMP/mi" "$TMP/a.tar"
is "$(files "$TMP/mi")" "a-00000.shard a-00001.shard " "and the set unchanged"

# an input that shrinks: the same name, fewer images
mkdir "$TMP/sh" && cp "$TMP/a.tar" "$TMP/sh/x.tar"
sa1b-shard $opts --max-images 2 -o "$TMP/shout" "$TMP/sh/x.tar" || exit 99
cp "$TMP/small.tar" "$TMP/sh/x.tar"
run_ok "a smaller input under the same name, --skip-existing" \
    sa1b-shard $opts --skip-existing --max-images 2 -o "$TMP/shout" "$TMP/sh/x.tar"
is "$(files "$TMP/shout")" "x-00000.shard x-00001.shard " "its old third part is gone"
is "$(shard_ids "$TMP"/shout/*.shard)" "100 101 102 " "only the new images"
run_ok "a rerun" sa1b-shard -j 2 --image-size 32 --skip-existing --max-images 2 -o "$TMP/shout" "$TMP/sh/x.tar"
grep_ok "complete output exists, skipped" "$TMP/.err" "is up to date"

# the other form: name.shard against name-NNNNN.shard, both ways
run_ok "the same input without --max-images" sa1b-shard -j 2 --image-size 32 -o "$TMP/mi" "$TMP/a.tar"
is "$(files "$TMP/mi")" "a.shard " "the parts are gone"
is "$(shard_ids "$TMP"/mi/*.shard)" "1 2 3 4 5 6 " "every image once"
run_ok "and with --max-images again" sa1b-shard -j 2 --image-size 32 --max-images 4 -o "$TMP/mi" "$TMP/a.tar"
is "$(files "$TMP/mi")" "a-00000.shard a-00001.shard " "the single shard is gone"
grep_ok "^sa1b-shard: removed '$TMP/mi/a.shard', left from an earlier run of this output$" "$TMP/.err" "one line says so"
# one .shard output: OUT's name and its parts
sa1b-shard $opts --max-images 2 -o "$TMP/one.shard" "$TMP/a.tar" || exit 99
run_ok "one .shard output, without --max-images" sa1b-shard $opts -o "$TMP/one.shard" "$TMP/a.tar"
is "$(ls "$TMP" | grep '^one' | tr '\n' ' ')" "one.shard " "its parts are gone"
sa1b-shard $opts --max-images 2 -o "$TMP/one.shard" "$TMP/a.tar" || exit 99
is "$(ls "$TMP" | grep '^one' | tr '\n' ' ')" "one-00000.shard one-00001.shard one-00002.shard " "and the reverse"

# what is not this output's is left alone: a file that is not a shard, and
# the shard of an input named like a part (a-00005.tar gives a-00005.shard)
mkdir "$TMP/k" && echo "my notes" >"$TMP/k/a-00004.shard"
cp "$TMP/small.tar" "$TMP/a-00005.tar"
sa1b-shard $opts -o "$TMP/k" "$TMP/a-00005.tar" || exit 99
sa1b-shard $opts --max-images 2 -o "$TMP/k" "$TMP/a.tar" || exit 99
sa1b-shard $opts -o "$TMP/k" "$TMP/a.tar" || exit 99
is "$(files "$TMP/k")" "a-00004.shard a-00005.shard a.shard " "another input's shard and a non-shard stay"
is "$(cat "$TMP/k/a-00004.shard")" "my notes" "the non-shard intact"
is "$(shard_ids "$TMP/k/a-00005.shard")" "100 101 102 " "the other input's shard intact"
done_testing
