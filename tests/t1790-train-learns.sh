#!/bin/sh
# t1790: the learning recipe of sa1b-train(1) EXAMPLES, cut down to a few
# dozen steps on a tiny synthetic set: flat synthetic masks, shards for the
# tiny model, training; the loss must fall.  No timing is asserted.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null || skip_all "sa1b-synth or sa1b-shard not built"
run_ok "synthesise flat masks" sa1b-synth --quiet -n 16 -W 480 -H 320 -m 40 -s 1 --nesting flat -o "$TMP/t.tar"
run_ok "shard for the tiny model" sa1b-shard -q --image-size 128 --min-area 900 -o "$TMP/t.shard" "$TMP/t.tar"
run_ok "train 60 steps of the recipe" sa1b-train --config tiny --data "$TMP/t.shard" --out "$TMP/run" \
    --steps 60 --batch 4 --masks 16 --points 2 --lr 5e-4 --seed 1 --log-every 1 --threads 2 -q
is "$(wc -l <"$TMP/run/log.jsonl" | tr -d ' ')" "60" "one log record per step"
sed 's/.*"loss": \([0-9.e+-]*\),.*/\1/' "$TMP/run/log.jsonl" >"$TMP/loss"
# mean of the first five losses against the mean of the last five
verdict=$(awk '{ l[NR] = $1 } END {
    a = (l[1] + l[2] + l[3] + l[4] + l[5]) / 5; b = (l[NR-4] + l[NR-3] + l[NR-2] + l[NR-1] + l[NR]) / 5
    printf "%s first %.4f last %.4f", (b == b && b < 0.8 * a) ? "falls" : "flat", a, b }' "$TMP/loss")
echo "# loss: $verdict"
case $verdict in falls*) r=0 ;; *) r=1 ;; esac
ok $r "the loss falls by more than a fifth (mean of the first five steps against the last five)"
done_testing
