#!/bin/sh
# t1300-shard-inspect.sh - sa1b-inspect: JSON lines parsed back and compared
# with what the writer was given (raw and jpeg, images without masks, an
# empty shard), --summary, usage and error statuses.
. "$top_srcdir/tests/test-lib.sh"
GEN="$BUILD/tests/test-shard-gen"
cd "$TMP" || exit 99

run_ok "write a raw shard" "$GEN" gen raw.shard -n 7 -s 32 -r 8 -m 6 --seed 3
run_ok "inspect --rle" sa1b-inspect --rle raw.shard
cp "$TMP/.out" raw.jsonl
run_ok "raw: every key matches what was written" "$GEN" check-inspect raw.shard raw.jsonl
is "$(grep -c '"type": "image"' raw.jsonl)" 7 "one line per image"
is "$(head -1 raw.jsonl | cut -c1-34)" '{"type": "shard", "file": "raw.sha' "header line first"

run_ok "write a jpeg shard with odd mask size" "$GEN" gen jpeg.shard -n 5 -s 48 -r 13 -m 4 -f jpeg --seed 4
run_ok "inspect jpeg --rle" sa1b-inspect --rle jpeg.shard
cp "$TMP/.out" jpeg.jsonl
run_ok "jpeg: every key matches" "$GEN" check-inspect jpeg.shard jpeg.jsonl

run_ok "write an empty shard" "$GEN" gen empty.shard -n 0 -s 16 -r 4
run_ok "inspect an empty shard" sa1b-inspect empty.shard
is "$(wc -l < "$TMP/.out" | tr -d ' ')" 1 "empty shard: header line only"
grep_ok '"images": 0' "$TMP/.out" "empty shard: zero images"

run_ok "inspect without --masks" sa1b-inspect raw.shard
is "$(grep -c '"type": "mask"' "$TMP/.out")" 0 "no mask lines without --masks"
run_ok "two files" sa1b-inspect raw.shard empty.shard
is "$(grep -c '"type": "shard"' "$TMP/.out")" 2 "a header line per file"

run_ok "summary" sa1b-inspect --summary raw.shard
grep_ok '^images +7$' "$TMP/.out" "summary: images"
grep_ok '^strategy +quality' "$TMP/.out" "summary: strategy from provenance"
grep_ok 'histogram' "$TMP/.out" "summary: histogram"

run_ok "--help" sa1b-inspect --help
grep_ok '^Usage: sa1b-inspect' "$TMP/.out" "--help prints usage on stdout"
run_ok "--version" sa1b-inspect --version
run_status 2 "no file: usage error" sa1b-inspect
run_status 2 "unknown option: usage error" sa1b-inspect --bogus raw.shard
run_status 2 "--summary with --masks: usage error" sa1b-inspect --summary --masks raw.shard
run_status 3 "missing file: status 3" sa1b-inspect nonexistent.shard
grep_ok "^sa1b-inspect: 'nonexistent.shard': cannot open: No such file" "$TMP/.err" "missing file message"
echo "just text, not a shard at all" > text.txt
run_status 1 "a text file: status 1" sa1b-inspect text.txt
grep_ok "bad magic, not a sa1b shard" "$TMP/.err" "a text file: message"
run_status 1 "a bad file among good ones: status 1" sa1b-inspect raw.shard text.txt empty.shard
is "$(grep -c '"type": "shard"' "$TMP/.out")" 2 "the good files are still printed"
done_testing
