#!/bin/sh
# t1310-shard-verify.sh - sa1b-verify catches truncation at several points,
# a flipped bit in a payload, in the index, in the header, a zero-length
# file and a file of another kind, each with its status and message.
. "$top_srcdir/tests/test-lib.sh"
GEN="$BUILD/tests/test-shard-gen"
cd "$TMP" || exit 99

"$GEN" gen good.shard -n 6 -s 32 -r 8 -m 5 --seed 9 || exit 99
size=$(wc -c < good.shard | tr -d ' ')
sa1b-inspect good.shard > info.jsonl || exit 99
# offsets from sa1b-inspect: the index table and the third image's payload
index_offset=$(head -1 info.jsonl | sed 's/.*"index_offset": \([0-9]*\).*/\1/')
payload=$(grep '"index": 2,' info.jsonl | sed 's/.*"image_offset": \([0-9]*\).*/\1/')

run_ok "an intact shard verifies" sa1b-verify good.shard
grep_ok '^good.shard: ok \(6 images, [0-9]+ masks, [0-9]+ bytes\)$' "$TMP/.out" "result line"
run_ok "--stats" sa1b-verify --stats good.shard
grep_ok "GB/s" "$TMP/.err" "--stats reports throughput"
run_ok "--quiet" sa1b-verify -q good.shard
is "$(cat "$TMP/.out")" "" "--quiet prints nothing"

for cut in 1 100 255 300 $((size / 2)) $((size - 64)) $((size - 1)); do
    head -c "$cut" good.shard > cut.shard
    run_status 1 "truncated at $cut bytes: status 1" sa1b-verify cut.shard
    grep_ok "sa1b-verify: 'cut.shard': .*(truncated|ends inside)" "$TMP/.err" "truncated at $cut: message"
done
head -c "$((size / 2))" good.shard > cut.shard
sa1b-verify cut.shard 2> err.txt
grep_ok "file is $((size / 2)) bytes but its header says $size: truncated" err.txt "truncation message names both sizes"

cp good.shard flip.shard; "$GEN" flip flip.shard $((payload + 10)) 3
run_status 1 "flipped bit in a payload: status 1" sa1b-verify flip.shard
grep_ok "'flip.shard': image 2 \(id 106\) payload at offset $payload: CRC32C 0x[0-9a-f]{8} != stored 0x[0-9a-f]{8}" "$TMP/.err" "payload flip: image, id and offset named"
grep_ok '^flip.shard: damaged \(1 problem\)' "$TMP/.out" "payload flip: one problem, other images checked"

p4=$(grep '"index": 4,' info.jsonl | sed 's/.*"image_offset": \([0-9]*\).*/\1/')
"$GEN" flip flip.shard $((p4 + 1)) 0
sa1b-verify -j 1 flip.shard > j1.out 2> j1.err
sa1b-verify -j 3 flip.shard > j3.out 2> j3.err
cmp -s j1.err j3.err && cmp -s j1.out j3.out
ok $? "-j 1 and -j 3 report the same problems in the same order"
is "$(grep -c CRC32C j3.err)" 2 "two damaged payloads, two problems"

cp good.shard flip.shard; "$GEN" flip flip.shard $((index_offset + 96 * 3 + 2)) 0
run_status 1 "flipped bit in the index: status 1" sa1b-verify flip.shard
grep_ok "index table at offset $index_offset: CRC32C" "$TMP/.err" "index flip: table and offset named"

cp good.shard flip.shard; "$GEN" flip flip.shard 33 5
run_status 1 "flipped bit in the header: status 1" sa1b-verify flip.shard
grep_ok "header at offset 0: CRC32C 0x[0-9a-f]{8} != stored" "$TMP/.err" "header flip message"

cp good.shard flip.shard; "$GEN" flip flip.shard $((size - 30)) 1
run_status 1 "flipped bit in the footer: status 1" sa1b-verify flip.shard
grep_ok "footer at offset $((size - 64)): CRC32C" "$TMP/.err" "footer flip message"

: > empty.shard
run_status 1 "zero-length file: status 1" sa1b-verify empty.shard
grep_ok "'empty.shard': empty file \(0 bytes\): no shard header" "$TMP/.err" "zero-length message"

printf '{"image": {"image_id": 1}, "annotations": []}\n' > other.json
run_status 1 "a file of another kind: status 1" sa1b-verify other.json
grep_ok "'other.json': header at offset 0: bad magic, not a sa1b shard" "$TMP/.err" "other kind message"

run_status 3 "missing file: status 3" sa1b-verify missing.shard
grep_ok "'missing.shard': cannot open: No such file or directory" "$TMP/.err" "missing file message"
run_status 3 "a directory: status 3" sa1b-verify .

crafted="$SRC/tests/fuzz/corpus/shard/crafted-payload-offset"
run_status 1 "a crafted index row (CRCs right): status 1" sa1b-verify "$crafted"
grep_ok "index row 0 at offset [0-9]+: payload offset 9999936 beyond file size [0-9]+" "$TMP/.err" "crafted row: row, offset and field named"
run_status 1 "a crafted mask row: status 1" sa1b-verify "$SRC/tests/fuzz/corpus/shard/crafted-mask-data-offset"
grep_ok "mask row 1 at offset [0-9]+: data offset 0, want [0-9]+ \(image 2 mask 0\)" "$TMP/.err" "crafted mask row message"

run_status 1 "good and damaged together: status 1" sa1b-verify good.shard flip.shard
grep_ok '^good.shard: ok' "$TMP/.out" "the good file is still reported ok"
run_status 2 "no file: usage" sa1b-verify
run_status 2 "bad option: usage" sa1b-verify --nope good.shard
run_ok "--help" sa1b-verify --help
grep_ok '^Usage: sa1b-verify' "$TMP/.out" "--help on stdout"
done_testing
