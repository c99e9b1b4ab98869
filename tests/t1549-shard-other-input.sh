#!/bin/sh
# t1549: with one .shard output, a commit removes only this input's files
# of the other form and its own stale parts, never the shards of another
# input that share OUT's name (name-NNNNN.shard of input "name", written
# into the same folder by a folder run); and a complete shard of another
# input is kept from a cut input's shard with a line that says whose it is.
# Another input's parts at the parts' names of a split one .shard output are
# refused at start-up (exit 2), as two inputs writing one output.
# Before: "-o t/x.shard a.tar" removed x.tar's parts x-0000N.shard (and,
# with --max-images, x.tar's x.shard), exit 0; the kept line said
# "complete output kept" as if it were the cut input's own.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
sa1b-synth --quiet -n 6 -W 120 -H 80 -m 4 -o "$TMP/x.tar" || exit 99
sa1b-synth --quiet -n 3 -W 120 -H 80 -m 4 -s 5 --first-id 100 -o "$TMP/a.tar" || exit 99
opts="-j 2 --image-size 32"

# x.tar's parts in t2, then a.tar into t2/x.shard
sa1b-shard -q $opts --max-images 2 -o "$TMP/t2" "$TMP/x.tar" "$TMP/a.tar" || exit 99
run_ok "another input into OUT x.shard beside x.tar's parts" sa1b-shard $opts -o "$TMP/t2/x.shard" "$TMP/a.tar"
is "$(files "$TMP/t2")" "a-00000.shard a-00001.shard x-00000.shard x-00001.shard x-00002.shard x.shard " \
    "x.tar's three parts are still there"
is "$(shard_ids "$TMP"/t2/x-0000*.shard)" "1 2 3 4 5 6 " "with x.tar's images"
is "$(shard_ids "$TMP/t2/x.shard")" "100 101 102 " "x.shard holds a.tar's"
grep -q "removed" "$TMP/.err"
ok $((!$?)) "no line says something was removed"

# x.tar's x.shard in t3, then a.tar split into t3/x-NNNNN.shard
sa1b-shard -q $opts -o "$TMP/t3" "$TMP/x.tar" "$TMP/a.tar" || exit 99
run_ok "another input split into OUT x.shard's parts" sa1b-shard $opts --max-images 2 -o "$TMP/t3/x.shard" "$TMP/a.tar"
is "$(files "$TMP/t3")" "a.shard x-00000.shard x-00001.shard x.shard " "x.tar's x.shard is still there"
is "$(shard_ids "$TMP/t3/x.shard")" "1 2 3 4 5 6 " "with x.tar's images"
grep -q "removed" "$TMP/.err"
ok $((!$?)) "no line says something was removed"

# this input's own other form and stale parts still go, one .shard output
mkdir "$TMP/t4" && sa1b-shard -q $opts --max-images 1 -o "$TMP/t4/o.shard" "$TMP/a.tar" || exit 99
run_ok "the same input again, unsplit" sa1b-shard $opts -o "$TMP/t4/o.shard" "$TMP/a.tar"
is "$(files "$TMP/t4")" "o.shard " "its own parts are gone"
grep_ok "^sa1b-shard: removed '$TMP/t4/o-00002.shard', left from an earlier run of this output$" "$TMP/.err" \
    "one line each"
sa1b-shard -q $opts --max-images 2 -o "$TMP/t4/o.shard" "$TMP/a.tar" || exit 99
is "$(files "$TMP/t4")" "o-00000.shard o-00001.shard " "and the reverse"

# a cut input never replaces a complete shard, another input's neither; the line says whose it is
mkdir "$TMP/k" "$TMP/cut"
sa1b-shard -q $opts -o "$TMP/k/o.shard" "$TMP/x.tar" || exit 99
cp "$TMP/k/o.shard" "$TMP/o.shard.orig"
head -c $(($(stat -c %s "$TMP/a.tar") / 2)) "$TMP/a.tar" >"$TMP/cut/cut.tar"
run_status 1 "a cut input into OUT, a complete shard of x.tar there: exit 1" \
    sa1b-shard $opts -o "$TMP/k/o.shard" "$TMP/cut/cut.tar"
grep_ok "^sa1b-shard: '$TMP/k/o.shard' \(a complete shard of 'x'\) kept, not replaced by the shard of '$TMP/cut/cut.tar', which was truncated \(--force replaces it\)$" \
    "$TMP/.err" "one line says it is x's shard, kept"
cmp -s "$TMP/o.shard.orig" "$TMP/k/o.shard"
ok $? "untouched"
grep_ok " 0 shards written" "$TMP/.err" "the summary counts no shard"
sa1b-shard -q $opts --max-images 2 -o "$TMP/k/p.shard" "$TMP/x.tar" || exit 99
# parts are names derived from OUT: another input's are never replaced, refused at start-up
run_status 2 "the same over a complete set of x.tar's parts: refused, exit 2" \
    sa1b-shard -q $opts --max-images 2 -o "$TMP/k/p.shard" "$TMP/cut/cut.tar"
grep_ok "^sa1b-shard: output '$TMP/k/p-00000.shard' is a shard of input 'x', not of '$TMP/cut/cut.tar': two inputs would write the same output \(shard them into different folders\)$" \
    "$TMP/.err" "one line says whose set it is"
is "$(shard_ids "$TMP"/k/p-*.shard)" "1 2 3 4 5 6 " "which is intact"
run_status 1 "--force replaces it" sa1b-shard -q $opts -o "$TMP/k/o.shard" --force "$TMP/cut/cut.tar"
cmp -s "$TMP/o.shard.orig" "$TMP/k/o.shard"
is "$?" "1" "with the cut input's shard"
is "$(shard_ids "$TMP/k/o.shard")" "100 " "(its sample before the cut)"
done_testing
