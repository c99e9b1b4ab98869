#!/bin/sh
# t1540: reruns never keep a shard of an input that has changed or was cut
# short.  Provenance records each input's size, CRC32C and clean end; a tar
# cut short says so (summary line, provenance, sa1b-verify exit 4); a rerun
# with --skip-existing re-shards exactly the inputs that changed or were
# read to an early end, with one line saying why, and keeps the others; a
# part cut short is named a damaged shard (--force replaces it).
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
mkdir "$TMP/full" "$TMP/tars"
for n in a b c; do
    sa1b-synth --quiet -n 8 -W 160 -H 120 -m 4 -s "$(printf %d "'$n")" -o "$TMP/full/$n.tar" || exit 99
done
sa1b-synth --quiet -n 12 -W 160 -H 120 -m 4 -s 9 -o "$TMP/full/d.tar" || exit 99
cp "$TMP/full/a.tar" "$TMP/full/c.tar" "$TMP/tars/"
size=$(stat -c %s "$TMP/full/b.tar")
head -c $((size / 2 + 100)) "$TMP/full/b.tar" >"$TMP/tars/b.tar"   # a download cut short
opts="-j 2 --image-size 32 --skip-existing --json-summary"
sa1b-shard $opts -o "$TMP/out" "$TMP/tars/a.tar" "$TMP/tars/b.tar" "$TMP/tars/c.tar" >"$TMP/sum1" 2>"$TMP/err1"
is "$?" "1" "a cut input: exit 1"
grep_ok "^sa1b-shard: '$TMP/tars/b.tar': input ends early, after sample sa_[0-9]+: [0-9] images read, the rest lost" \
    "$TMP/err1" "the summary says which input ended early and how much of it was read"
grep_ok '"inputs_cut_short":1' "$TMP/sum1" "the JSON summary counts it"
grep_ok "^sa1b-shard: '$TMP/tars/b.tar': sa_[0-9]+\.(jpg|json): member truncated" "$TMP/err1" \
    "the per-sample message names its input"
run_ok "inspect the cut input's shard" sa1b-inspect "$TMP/out/b.shard"
grep_ok '"input_clean_end": false, "input_crc32c": "[0-9a-f]{8}", "input_ends_after": "sa_[0-9]+"' "$TMP/.out" \
    "its provenance says the input ended early"
grep_ok "\"input_bytes\": $((size / 2 + 100)), \"input_clean_end\": false" "$TMP/.out" "and records the bytes read"
sa1b-inspect --summary "$TMP/out/b.shard" >"$TMP/sum-b"
grep_ok "^input +b: $((size / 2 + 100)) bytes, crc32c [0-9a-f]{8}, ended early, after sa_[0-9]+ \(the images after it are missing\)$" \
    "$TMP/sum-b" "sa1b-inspect --summary says so too"
run_status 4 "sa1b-verify: incomplete, exit 4" sa1b-verify -q "$TMP/out/b.shard"
grep_ok "'$TMP/out/b.shard': incomplete: made from an input that ended early" "$TMP/.err" "and says why"
sa1b-verify "$TMP/out/a.shard" "$TMP/out/b.shard" >"$TMP/v" 2>/dev/null
is "$?" "4" "an intact and an incomplete shard: exit 4"
grep_ok "b.shard: incomplete \([0-9] images, [0-9]+ masks; its input ended early, after sample sa_[0-9]+\)$" "$TMP/v" \
    "the result line says incomplete, and where the input ended"
head -c 700 "$TMP/full/b.tar" >"$TMP/tiny-cut.tar"   # cut inside the first member
sa1b-shard -q -j 2 --image-size 32 -o "$TMP/tiny.shard" "$TMP/tiny-cut.tar" 2>/dev/null
run_status 4 "a cut in the first member: an empty shard, incomplete" sa1b-verify "$TMP/tiny.shard"
grep_ok "its input ended early, before its first sample\)$" "$TMP/.out" "says so"
run_ok "the complete inputs verify" sa1b-verify "$TMP/out/a.shard" "$TMP/out/c.shard"
sa1b-inspect "$TMP/out/a.shard" | head -1 >"$TMP/prov-a"
grep_ok "\"input_bytes\": $(stat -c %s "$TMP/tars/a.tar"), \"input_clean_end\": true" "$TMP/prov-a" \
    "a complete input's size and clean end are recorded"

# a tar cut at a 512-byte boundary between two samples (libarchive takes it
# for a complete one): the missing end-of-archive blocks give it away, from a
# path and from a pipe
at=$(/usr/bin/python3 -c 'import sys, tarfile
m = tarfile.open(sys.argv[1]).getmembers()[5]
print(m.offset_data + (m.size + 511) // 512 * 512)' "$TMP/full/b.tar") || exit 99
head -c "$at" "$TMP/full/b.tar" >"$TMP/bcut.tar"
sa1b-shard -j 2 --image-size 32 -o "$TMP/bcut.shard" "$TMP/bcut.tar" 2>"$TMP/err"
is "$?" "1" "a tar cut between samples: exit 1"
grep_ok "^sa1b-shard: '$TMP/bcut.tar': input ends early, after sample sa_3: 3 images read, the rest lost$" "$TMP/err" \
    "and the line says where it ended"
cat "$TMP/bcut.tar" | sa1b-shard -q -j 2 --image-size 32 --name bcut -o "$TMP/bcut2.shard" - 2>/dev/null
cmp -s "$TMP/bcut.shard" "$TMP/bcut2.shard"
ok $? "the same shard through a pipe"
run_status 4 "which sa1b-verify calls incomplete" sa1b-verify -q "$TMP/bcut2.shard"
# --strict: a cut input is a bad one, exit 3 and nothing of it written, from
# a path and from a pipe
run_status 3 "--strict: a tar cut between samples exits 3" \
    sa1b-shard --strict -j 2 --image-size 32 -o "$TMP/strict.shard" "$TMP/bcut.tar"
grep_ok "^sa1b-shard: '$TMP/bcut.tar': input ends early, after sample sa_3: 3 images read, the rest lost$" "$TMP/.err" \
    "with the same line"
test ! -e "$TMP/strict.shard" && test ! -e "$TMP/strict.shard.partial"
ok $? "and no shard (nor a temporary) is left"
cat "$TMP/bcut.tar" | sa1b-shard --strict -q -j 2 --image-size 32 --name bcut -o "$TMP/strict2.shard" - 2>"$TMP/err"
is "$?" "3" "--strict through a pipe: exit 3"
test ! -e "$TMP/strict2.shard"
ok $? "and no shard"
run_ok "--strict, a complete tar: exit 0" sa1b-shard --strict -q -j 2 --image-size 32 -o "$TMP/strict3.shard" "$TMP/full/b.tar"

# the complete tar arrives under the same name: only b is sharded again
cp "$TMP/full/b.tar" "$TMP/tars/b.tar"
ls -i "$TMP/out/a.shard" "$TMP/out/c.shard" >"$TMP/inodes1"
sa1b-shard $opts -o "$TMP/out" "$TMP/tars/a.tar" "$TMP/tars/b.tar" "$TMP/tars/c.tar" >"$TMP/sum2" 2>"$TMP/err2"
is "$?" "0" "rerun with --skip-existing: exit 0"
grep_ok "^sa1b-shard: '$TMP/tars/b.tar': the run that made its shard read it to an early end \(after sa_[0-9]+\): sharding it again$" \
    "$TMP/err2" "one line says why b is sharded again"
is "$(grep -c 'complete output exists, skipped' "$TMP/err2")" "2" "a and c are up to date"
grep_ok '"images":8,.*"shards":1,"inputs_up_to_date":2' "$TMP/sum2" "exactly one input sharded, its 8 images"
ls -i "$TMP/out/a.shard" "$TMP/out/c.shard" >"$TMP/inodes2"
cmp -s "$TMP/inodes1" "$TMP/inodes2"
ok $? "the shards of a and c were left alone"
total=0
for n in a b c; do
    k=$(sa1b-inspect "$TMP/out/$n.shard" | grep -c '"type": *"image"')
    total=$((total + k))
done
is "$total" "24" "all 24 images are present"
run_ok "every shard verifies" sa1b-verify "$TMP/out/a.shard" "$TMP/out/b.shard" "$TMP/out/c.shard"

# a shard made by another version of sa1b-shard (same options, same input)
# is up to date: only what shapes the output counts
/usr/bin/python3 "$SRC/tests/shard_restamp.py" "$TMP/out/a.shard" || exit 99
run_ok "the restamped shard is valid" sa1b-verify -q "$TMP/out/a.shard"
sa1b-inspect "$TMP/out/a.shard" | head -1 >"$TMP/pa"
grep_ok '"version": "9\.9\.9"' "$TMP/pa" "and says another version made it"
sa1b-shard $opts -o "$TMP/out" "$TMP/tars/a.tar" >"$TMP/sumv" 2>"$TMP/errv"
grep_ok '"shards":0,"inputs_up_to_date":1' "$TMP/sumv" "another version's shard is up to date"

# another tar under a known name: its size differs, it is sharded again (a
# tar of the same size is not told apart: inputs are never re-read to decide)
cp "$TMP/full/d.tar" "$TMP/tars/c.tar"
sa1b-shard $opts -o "$TMP/out" "$TMP/tars/c.tar" >"$TMP/sum3" 2>"$TMP/err3"
is "$?" "0" "rerun after c.tar changed: exit 0"
grep_ok "^sa1b-shard: '$TMP/tars/c.tar': input changed since its shard was made \($size bytes then, $(stat -c %s "$TMP/full/d.tar") now\): sharding it again$" \
    "$TMP/err3" "one line says the input changed"
grep_ok '"shards":1,"inputs_up_to_date":0' "$TMP/sum3" "and it is sharded again"
sa1b-shard $opts -o "$TMP/out" "$TMP/tars/c.tar" >"$TMP/sum4" 2>"$TMP/err4"
grep_ok '"shards":0,"inputs_up_to_date":1' "$TMP/sum4" "then it is up to date"

# the input's identity is the same from a path and from stdin
sa1b-shard -q -j 2 --image-size 32 -o "$TMP/p.shard" "$TMP/tars/b.tar" && \
    sa1b-shard -q -j 1 --image-size 32 --name b -o "$TMP/s.shard" - <"$TMP/tars/b.tar"
ok $? "the same tar by path and on stdin"
cmp -s "$TMP/p.shard" "$TMP/s.shard"
ok $? "give identical shards"
head -c $((size / 2 + 100)) "$TMP/full/b.tar" >"$TMP/cut.tar"
sa1b-shard -q -j 2 --image-size 32 -o "$TMP/pc.shard" "$TMP/cut.tar" 2>/dev/null
cat "$TMP/cut.tar" | sa1b-shard -q -j 2 --image-size 32 --name cut -o "$TMP/sc.shard" - 2>/dev/null
cmp -s "$TMP/pc.shard" "$TMP/sc.shard"
ok $? "also for a cut tar (path, and through a pipe)"
# a tar with a bad sample: a rerun that keeps its shard says that the shard
# lacks it, exit 1, as the first run did (before: exit 0 and nothing, so a
# "rerun until exit 0" loop ended believing the set clean); the count is in
# the last part's provenance (samples_skipped)
mkdir "$TMP/bs" "$TMP/bs/x"
tar -xf "$TMP/full/a.tar" -C "$TMP/bs/x" || exit 99
first=$(tar -tf "$TMP/full/a.tar" | grep '\.json$' | head -n 1)
echo '{broken' >"$TMP/bs/x/$first"
(cd "$TMP/bs/x" && tar -cf ../a.tar $(tar -tf "$TMP/full/a.tar")) || exit 99
run_status 1 "a tar with a bad sample: exit 1" sa1b-shard -q -j 2 --image-size 32 --skip-existing -o "$TMP/bs/o" "$TMP/bs/a.tar"
run_status 1 "the same command again: exit 1" sa1b-shard -q -j 2 --image-size 32 --skip-existing -o "$TMP/bs/o" "$TMP/bs/a.tar"
grep_ok "^sa1b-shard: '$TMP/bs/a.tar': complete output exists, skipped; it lacks 1 sample that the run which made it skipped" \
    "$TMP/.err" "one line says the kept shard lacks a sample (with -q too)"
sa1b-inspect "$TMP/bs/o/a.shard" | grep -q '"samples_skipped": *1'
ok $? "its provenance records it"
# a part of the set cut short (a copy, a disk): the rerun cannot tell whose
# it is and says what it is, not "not a shard"; --force replaces it
mkdir "$TMP/dm"
run_ok "a set of parts" sa1b-shard -q -j 2 --image-size 32 --max-images 4 -o "$TMP/dm" "$TMP/full/d.tar"
truncate -s 3000 "$TMP/dm/d-00001.shard"
run_status 2 "--skip-existing over a part cut short: exit 2" \
    sa1b-shard -q -j 2 --image-size 32 --max-images 4 --skip-existing -o "$TMP/dm" "$TMP/full/d.tar"
grep_ok "^sa1b-shard: output '$TMP/dm/d-00001.shard' is a damaged shard \(file is 3000 bytes but its header says [0-9]+: truncated\), whose input cannot be told: give --force to replace it, or remove it$" \
    "$TMP/.err" "one line says it is a damaged shard"
run_ok "--force replaces it" sa1b-shard -q -j 2 --image-size 32 --max-images 4 --force -o "$TMP/dm" "$TMP/full/d.tar"
run_ok "the set is whole again" sa1b-verify -q "$TMP"/dm/d-*.shard
done_testing
