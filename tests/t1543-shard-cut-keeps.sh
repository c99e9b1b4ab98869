#!/bin/sh
# t1543: a rerun on a truncated input never replaces a complete output (it
# may be the only intact copy): the output is kept, one line names it and
# says the input was truncated, exit 1; --force replaces it; with no
# complete output the shard of the samples before the cut is written as
# before.  A sample that cannot be prepared (or read) for want of memory is no bad
# sample: the input fails (exit 3), nothing of it is written, and an
# earlier output stays as it was (a shard without that sample would look
# complete: --skip-existing would never redo it).
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
mkdir "$TMP/cut"
sa1b-synth --quiet -n 12 -W 160 -H 120 -m 4 -o "$TMP/full.tar" || exit 99
size=$(stat -c %s "$TMP/full.tar")
cp "$TMP/full.tar" "$TMP/cut/k.tar"
opts="-j 2 --image-size 32"
sa1b-shard -q $opts -o "$TMP/out" "$TMP/cut/k.tar" || exit 99
run_ok "a complete shard" sa1b-verify -q "$TMP/out/k.shard"
cp "$TMP/out/k.shard" "$TMP/k.shard.orig"
head -c $((size / 2)) "$TMP/full.tar" >"$TMP/cut/k.tar"   # the tar cut short
run_status 1 "--skip-existing on the cut tar: exit 1" sa1b-shard --skip-existing $opts -o "$TMP/out" "$TMP/cut/k.tar"
grep_ok "^sa1b-shard: '$TMP/cut/k.tar': input ends early, after sample sa_[0-9]+" "$TMP/.err" "says the input ended early"
grep_ok "^sa1b-shard: '$TMP/out/k.shard': complete output kept, not replaced by the shard of '$TMP/cut/k.tar', which was truncated \(--force replaces it\)$" \
    "$TMP/.err" "one line says the complete output is kept, and why"
cmp -s "$TMP/k.shard.orig" "$TMP/out/k.shard"
ok $? "the complete shard is untouched"
is "$(ls "$TMP/out" | tr '\n' ' ')" "k.shard " "and nothing else is left"
run_status 1 "without --skip-existing: the same" sa1b-shard -q $opts -o "$TMP/out" "$TMP/cut/k.tar"
cmp -s "$TMP/k.shard.orig" "$TMP/out/k.shard"
ok $? "the complete shard is untouched"
head -c $((size / 2)) "$TMP/full.tar" | sa1b-shard $opts --name k -o "$TMP/out" - >"$TMP/.out" 2>"$TMP/.err"
is "$?" "1" "the cut tar on standard input: exit 1"
grep_ok "^sa1b-shard: '$TMP/out/k.shard': complete output kept, not replaced by the shard of standard input, which was truncated" \
    "$TMP/.err" "says so"
cmp -s "$TMP/k.shard.orig" "$TMP/out/k.shard"
ok $? "the complete shard is untouched"
# split outputs: a complete set of parts is kept the same way
sa1b-shard -q $opts --max-images 4 -o "$TMP/parts" "$TMP/full.tar" || exit 99
ls -i "$TMP/parts" >"$TMP/ino1"
head -c $((size / 2)) "$TMP/full.tar" >"$TMP/full-cut.tar" && cp "$TMP/full-cut.tar" "$TMP/cut/full.tar"
run_status 1 "a complete set of parts, the input cut" sa1b-shard -q $opts --max-images 4 -o "$TMP/parts" "$TMP/cut/full.tar"
ls -i "$TMP/parts" >"$TMP/ino2"
cmp -s "$TMP/ino1" "$TMP/ino2"
ok $? "the set is kept as it was"
run_ok "which verifies" sa1b-verify -q "$TMP/parts"/*.shard
# --force replaces it
run_status 1 "--force" sa1b-shard -q --force $opts -o "$TMP/out" "$TMP/cut/k.tar"
run_status 4 "replaces the complete shard with the incomplete one" sa1b-verify -q "$TMP/out/k.shard"
# no complete output: the samples before the cut are written, as before
run_status 1 "the cut tar again, its incomplete shard in place" sa1b-shard -q $opts -o "$TMP/out" "$TMP/cut/k.tar"
run_status 4 "gives the incomplete shard" sa1b-verify -q "$TMP/out/k.shard"
run_status 1 "a cut tar, no output yet" sa1b-shard -q $opts -o "$TMP/new" "$TMP/cut/k.tar"
run_status 4 "gives the incomplete shard" sa1b-verify -q "$TMP/new/k.shard"
# out of memory in a worker: the input fails, never a shard without the sample
cp "$TMP/full.tar" "$TMP/cut/k.tar"
sa1b-shard -q $opts -o "$TMP/mem" "$TMP/cut/k.tar" || exit 99
cp "$TMP/mem/k.shard" "$TMP/mem.orig"
sa1b-synth --quiet -n 4 -W 160 -H 120 -m 4 --first-id 101 -o "$TMP/cut/m.tar" || exit 99
SA1B_TEST_FAIL=nomem:sa_5 sa1b-shard -q $opts -o "$TMP/mem" "$TMP/cut/k.tar" "$TMP/cut/m.tar" >"$TMP/.out" 2>"$TMP/.err"
is "$?" "3" "a sample out of memory: exit 3, not 1"
grep_ok "^sa1b-shard: '$TMP/cut/k.tar': sa_5: out of memory \(SA1B_TEST_FAIL\): nothing of it written" "$TMP/.err" \
    "one line names the input and the sample"
cmp -s "$TMP/mem.orig" "$TMP/mem/k.shard"
ok $? "the complete shard there is untouched"
run_ok "the other input of the run is written, every sample" sa1b-verify -q "$TMP/mem/m.shard"
is "$(sa1b-inspect --summary "$TMP/mem/m.shard" | awk '$1 == "images" { print $NF }')" "4" "all 4 images"
rm "$TMP/mem/k.shard"
SA1B_TEST_FAIL=nomem:sa_5 sa1b-shard -q $opts -o "$TMP/mem" "$TMP/cut/k.tar" >"$TMP/.out" 2>"$TMP/.err"
is "$?" "3" "no output yet: exit 3"
test ! -e "$TMP/mem/k.shard"
ok $? "and no shard that lacks the sample"
run_ok "a rerun with --skip-existing" sa1b-shard -q --skip-existing $opts -o "$TMP/mem" "$TMP/cut/k.tar"
cmp -s "$TMP/mem.orig" "$TMP/mem/k.shard"
ok $? "gives the whole shard"
# out of memory in the tar reader (a member of a compressed tar too large to
# copy under the limit): the input fails alike, not a sample skipped
if grep -q __asan_init "$BUILD/shard-tools/sa1b-shard" 2>/dev/null; then
    skip 4 "ulimit -v: not under AddressSanitizer"
elif ! command -v gzip >/dev/null; then
    skip 4 "gzip missing"
else
    mkdir "$TMP/big" && tar -xf "$TMP/full.tar" -C "$TMP/big" sa_1.jpg sa_1.json || exit 99
    head -c 300000000 /dev/zero >"$TMP/big/sa_9.jpg" && echo '{}' >"$TMP/big/sa_9.json" || exit 99
    (cd "$TMP/big" && tar -cf - sa_1.jpg sa_1.json sa_9.jpg sa_9.json) | gzip -1 >"$TMP/big.tar.gz" || exit 99
    rm -r "$TMP/big"
    (ulimit -v 250000 && exec sa1b-shard -q $opts -j 1 -o "$TMP/bigout.shard" "$TMP/big.tar.gz") >"$TMP/.out" 2>"$TMP/.err"
    is "$?" "3" "the tar reader out of memory: exit 3, not 1"
    grep_ok "^sa1b-shard: '$TMP/big.tar.gz': sa_9.jpg: out of memory: nothing of it written" "$TMP/.err" \
        "one line names the input and the member"
    is "$(grep -c . "$TMP/.err")" "1" "and nothing else"
    test ! -e "$TMP/bigout.shard"
    ok $? "no shard that lacks the sample"
fi
done_testing
