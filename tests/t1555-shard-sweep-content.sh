#!/bin/sh
# t1555: the sweep of stale temporaries removes a file of a temporary's
# name only when its content is what sa1b-shard's temporaries hold at some
# stage (nothing yet, or the writer's zeroed header first); a user's file
# whose suffix happens to be six letters or digits (a.shard.partial.backup,
# .draft1, .2024Q1) is left alone, and a complete shard under a
# temporary's name (a part a failed commit left, maybe the only copy) is
# named in one line and kept, unless it is a copy of the output under its
# final name (t1562).  Before: all of these were removed "as a
# temporary of an earlier run".
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
sa1b-synth --quiet -n 3 -W 120 -H 80 -m 4 -o "$TMP/a.tar" || exit 99
S="sa1b-shard -j 1 --image-size 32"
mkdir "$TMP/o6"
for f in backup draft1 2024Q1; do echo "my $f" >"$TMP/o6/a.shard.partial.$f"; done
: >"$TMP/o6/a.shard.partial.Zz09Yy"
head -c 300 /dev/zero >"$TMP/o6/a.shard.partial.Yy09Zz.tmp-Ab12Cd"
$S -q --image-size 48 -o "$TMP/c.shard" "$TMP/a.tar" || exit 99 # not a copy of the run's output
cp "$TMP/c.shard" "$TMP/o6/a.shard.partial.Kk11Kk"
run_ok "a run beside them" $S -q -o "$TMP/o6" "$TMP/a.tar"
is "$(files "$TMP/o6")" "a.shard a.shard.partial.2024Q1 a.shard.partial.Kk11Kk a.shard.partial.backup a.shard.partial.draft1 " \
    "the user's files and the complete shard stay, the two temporaries go"
for f in backup draft1 2024Q1; do
    is "$(cat "$TMP/o6/a.shard.partial.$f")" "my $f" "a.shard.partial.$f intact"
done
is "$(grep -c "a temporary of an earlier run" "$TMP/.err")" "2" "one line for each removed temporary, even with -q"
grep_ok "^sa1b-shard: '$TMP/o6/a.shard.partial.Kk11Kk' is a complete shard that an earlier run left under a temporary name \(it may be the only copy of its data\): left alone$" \
    "$TMP/.err" "the complete shard is named in one line"
cmp -s "$TMP/c.shard" "$TMP/o6/a.shard.partial.Kk11Kk"
ok $? "and intact"
done_testing
