#!/bin/sh
# t1554: a new part never replaces another input's shard, nor a user's
# file, at its name.  Before: 'a-00001.tar' into o3, then a.tar split into
# o3 renamed a.tar's part 1 onto a-00001.tar's complete shard (exit 0);
# '-o ./x.shard' split overwrote input x's parts x-0000N.shard; a-00002.tar
# unsplit replaced part 2 of a's set; a user's file at part 1 was replaced
# without --force (only part 0 was checked); and a-000001.shard (six
# digits, a name part_path never writes) was removed as a's stale part 1.
# A file at a part's name that cannot be read (here: mapped, under ulimit
# -v) may be anyone's shard: it is never taken for a file that is no shard
# (before: 'not a shard of sa1b-shard: give --force', and --force replaced
# it, another input's shard too).
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
sa1b-synth --quiet -n 6 -W 120 -H 80 -m 4 -o "$TMP/a.tar" || exit 99
sa1b-synth --quiet -n 3 -W 120 -H 80 -m 4 -s 5 --first-id 100 -o "$TMP/a-00001.tar" || exit 99
cp "$TMP/a-00001.tar" "$TMP/a-00002.tar"
cp "$TMP/a.tar" "$TMP/x.tar"
cp "$TMP/a-00001.tar" "$TMP/my a.tar"
S="sa1b-shard -j 1 --image-size 32"

# another input's shard at part 1's name: found at commit (part 0 is missing)
$S -q -o "$TMP/o3" "$TMP/a-00001.tar" || exit 99
cp "$TMP/o3/a-00001.shard" "$TMP/keep"
run_status 3 "a.tar split over a-00001.tar's shard: refused at commit, exit 3" \
    $S --max-images 3 -o "$TMP/o3" "$TMP/a.tar"
grep_ok "^sa1b-shard: '$TMP/o3/a-00001.shard' is the shard of input 'a-00001': not replaced by the shard of '$TMP/a.tar' \(two inputs would write the same output: shard them into different folders\)" \
    "$TMP/.err" "one line names the file and whose shard it is"
cmp -s "$TMP/keep" "$TMP/o3/a-00001.shard"
ok $? "a-00001.tar's shard is intact"
is "$(files "$TMP/o3")" "a-00001.shard " "nothing of a.tar put in place, no partial left"
grep_ok " 0 images, .* 0 shards written" "$TMP/.err" "the summary counts none of a.tar's images as written"

# another input's parts at a split one .shard output's part names: refused at start-up
(cd "$TMP" && $S -q --max-images 4 -o . x.tar) || exit 99
cp "$TMP/x-00000.shard" "$TMP/keep0"
run_status 2 "-o ./x.shard split over x.tar's parts: exit 2" \
    sh -c 'cd "$1" && shift && "$@"' _ "$TMP" $S -q --max-images 2 -o ./x.shard "my a.tar"
grep_ok "^sa1b-shard: output './x-00000.shard' is a shard of input 'x', not of 'my a.tar': two inputs would write the same output" \
    "$TMP/.err" "one line says whose it is"
cmp -s "$TMP/keep0" "$TMP/x-00000.shard"
ok $? "x.tar's part 0 intact"
is "$(shard_ids "$TMP"/x-0000*.shard)" "1 2 3 4 5 6 " "x.tar's set intact"

# an unsplit input whose name is another input's part
$S -q --max-images 2 -o "$TMP/c2" "$TMP/a.tar" || exit 99
run_status 2 "a-00002.tar over a.tar's part 2: exit 2" $S -q -o "$TMP/c2" "$TMP/a-00002.tar"
grep_ok "^sa1b-shard: output '$TMP/c2/a-00002.shard' is a shard of input 'a', not of '$TMP/a-00002.tar'" "$TMP/.err" \
    "one line says so"
is "$(shard_ids "$TMP"/c2/a-*.shard)" "1 2 3 4 5 6 " "a.tar's set intact"
run_ok "a.tar again with --skip-existing" $S --skip-existing --max-images 2 -o "$TMP/c2" "$TMP/a.tar"
grep_ok "complete output exists, skipped" "$TMP/.err" "is up to date"

# a user's file at part 1: refused without --force (at commit), replaced with it
mkdir "$TMP/o4" && echo precious >"$TMP/o4/a-00001.shard"
run_status 3 "a user's file at part 1: refused, exit 3" $S -q --max-images 3 -o "$TMP/o4" "$TMP/a.tar"
grep_ok "^sa1b-shard: '$TMP/o4/a-00001.shard' exists and is not a shard of sa1b-shard: not replaced by the shard of '$TMP/a.tar' \(give --force to replace it\)" \
    "$TMP/.err" "one line says why"
is "$(cat "$TMP/o4/a-00001.shard")" "precious" "the file is intact"
is "$(files "$TMP/o4")" "a-00001.shard " "nothing else put in place"
run_ok "with --force it is replaced" $S -q --force --max-images 3 -o "$TMP/o4" "$TMP/a.tar"
is "$(shard_ids "$TMP"/o4/a-*.shard)" "1 2 3 4 5 6 " "by a.tar's part"

# a name part_path never writes is no part of the set
$S -q --max-images 2 -o "$TMP/o9" "$TMP/a.tar" || exit 99
cp "$TMP/o9/a-00001.shard" "$TMP/o9/a-000001.shard"
run_ok "a rerun with fewer parts" $S -q --max-images 3 -o "$TMP/o9" "$TMP/a.tar"
is "$(files "$TMP/o9")" "a-00000.shard a-000001.shard a-00001.shard " "a-000001.shard is left alone"

# a file that cannot be mapped (8 GB, sparse, under ulimit -v 1 GB)
if grep -q __asan_init "$BUILD/shard-tools/sa1b-shard" 2>/dev/null; then
    skip 6 "ulimit -v: not under AddressSanitizer"
else
    mkdir "$TMP/o10" && truncate -s 8G "$TMP/o10/a-00001.shard" || exit 99
    (ulimit -v 1000000 && exec $S --force --max-images 3 -o "$TMP/o10" "$TMP/a.tar") >"$TMP/.out" 2>"$TMP/.err"
    is "$?" "3" "--force, a file at part 1's name that cannot be mapped: refused at commit, exit 3"
    grep_ok "^sa1b-shard: cannot check '$TMP/o10/a-00001.shard': cannot map: .*: nothing of '$TMP/a.tar' put in place" \
        "$TMP/.err" "one line says why"
    is "$(stat -c %s "$TMP/o10/a-00001.shard"):$(files "$TMP/o10")" "8589934592:a-00001.shard " "it is left as it was, alone"
    mv "$TMP/o10/a-00001.shard" "$TMP/o10/a.shard"
    (ulimit -v 1000000 && exec $S --force -o "$TMP/o10" "$TMP/a.tar") >"$TMP/.out" 2>"$TMP/.err"
    is "$?" "3" "found at start-up: exit 3"
    grep_ok "^sa1b-shard: cannot read output '$TMP/o10/a.shard': cannot map: " "$TMP/.err" "one line says why"
    is "$(stat -c %s "$TMP/o10/a.shard")" "8589934592" "it is left as it was"
fi
done_testing
