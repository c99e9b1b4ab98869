#!/bin/sh
# t0003: messages a newcomer can act on: a missing output folder is named
# as such (no temporary names), bounded numbers are refused outside their
# range, --steps 0 is refused, a file that is not a checkpoint is called
# that, model size rules are stated with their options, and "-" reads a
# shard from standard input or says why it cannot; sa1b-train's startup line
# comes once the arguments are checked and says what runs where.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null && command -v sa1b-train >/dev/null || skip_all "programs not built"
sa1b-synth --quiet -n 2 -W 80 -H 60 -m 3 -o "$TMP/a.tar" || exit 99
run_status 3 "sa1b-shard into a missing folder" sa1b-shard -q --image-size 32 -o "$TMP/no/such/x.shard" "$TMP/a.tar"
is "$(cat "$TMP/.err")" "sa1b-shard: output folder '$TMP/no/such' does not exist" "names the folder, no temporary"
for bad in "--min-iou 5" "--min-iou -1" "--min-stability 1.5" "--min-iou nan"; do
    # shellcheck disable=SC2086
    run_status 2 "sa1b-shard $bad is refused" sa1b-shard $bad --image-size 32 -o "$TMP/x.shard" "$TMP/a.tar"
    grep_ok "is not a number in 0\.\.[12]" "$TMP/.err" "and the message gives the range"
done
run_ok "sa1b-shard --min-iou 1.02 (SA-1B's predicted_iou exceeds 1)" sa1b-shard -q --min-iou 1.02 --image-size 32 \
    -o "$TMP/x.shard" "$TMP/a.tar"
run_status 3 "sa1b-train --out in a missing folder" sa1b-train --synthetic-batch 1 --out "$TMP/none/run"
is "$(cat "$TMP/.err")" "sa1b-train: output folder '$TMP/none' does not exist (--out $TMP/none/run is created in it)" \
    "says so at once"
run_status 2 "sa1b-train --steps 0" sa1b-train --steps 0 --synthetic-batch 1 --out "$TMP/r"
grep_ok "^sa1b-train: --steps: '0' is not an integer in 1\.\." "$TMP/.err" "says the range"
test ! -e "$TMP/r"
ok $? "and creates nothing"
printf 'PK\003\004 a zip file, not a checkpoint at all' >"$TMP/x.safetensors"
run_status 3 "--eval-only on a non-checkpoint" sa1b-train --eval-only "$TMP/x.safetensors" --synthetic-batch 1
grep_ok "x.safetensors': not a checkpoint" "$TMP/.err" "says it is not a checkpoint"
run_status 2 "an image size that is not a multiple of the patch" sa1b-train --config tiny --image-size 100 \
    --synthetic-batch 1 --out "$TMP/r"
grep_ok "image size 100 \(--image-size\) must be a multiple of the patch size [0-9]+ \(--patch\)" "$TMP/.err" \
    "states the rule with the options"
sa1b-train --config tiny --data "$TMP/none*.shard" --out "$TMP/r" >/dev/null 2>"$TMP/err"
is "$?:$(wc -l <"$TMP/err" | tr -d ' ')" "3:1" "sa1b-train with no shards: the error alone, no startup line before it"
sa1b-train --config tiny --enc-depth 1 --batch 2 --masks 2 --synthetic-batch 1 --steps 1 --threads 1 --out "$TMP/r" \
    >/dev/null 2>"$TMP/err"
head -1 "$TMP/err" >"$TMP/first"
grep_ok "^sa1b-train: training in $TMP/r, step 0 of 1: tiny config \(S=128\), [0-9]+ parameters, batch 2 x 2 masks x 2 points, fp32, cpu backend, 1 threads" \
    "$TMP/first" "the startup line says where, the config, the batch, the backend and the threads"
run_ok "a shard" sa1b-shard -q --image-size 32 -o "$TMP/s.shard" "$TMP/a.tar"
run_ok "sa1b-inspect - reads a shard redirected to stdin" sh -c 'sa1b-inspect - <"$1"' sh "$TMP/s.shard"
grep_ok '"type": *"image"' "$TMP/.out" "and shows it"
run_ok "sa1b-verify - too" sh -c 'sa1b-verify - <"$1"' sh "$TMP/s.shard"
run_status 3 "from a pipe it says why it cannot" sh -c 'cat "$1" | sa1b-inspect -' sh "$TMP/s.shard"
grep_ok "standard input is not a file: a shard is read through a memory mapping" "$TMP/.err" "and what to do"
done_testing
