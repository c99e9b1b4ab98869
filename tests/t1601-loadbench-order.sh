#!/bin/sh
# t1601-loadbench-order.sh - the loader's order seen through
# sa1b-loadbench --print-ids: exactly once per epoch, independent of the
# thread count and depth, resume equals the rest of the stream, rank
# slices make up the global batch.
. "${top_srcdir:-.}/tests/test-lib.sh"

sa1b-synth -n 9 -W 200 -H 150 -m 8 -s 5 -o "$TMP/a.tar" --quiet &&
sa1b-synth -n 4 -W 150 -H 220 -m 5 -s 6 --first-id 100 -o "$TMP/b.tar" --quiet &&
sa1b-synth -n 6 -W 180 -H 180 -m 5 -s 7 --first-id 200 -o "$TMP/c.tar" --quiet &&
sa1b-shard -q --image-size 32 --mask-size 8 -o "$TMP/out" "$TMP/a.tar" "$TMP/b.tar" "$TMP/c.tar"
ok $? "make three shards of 9, 4 and 6 images"
S="$TMP/out/a.shard $TMP/out/b.shard $TMP/out/c.shard"

# shellcheck disable=SC2086
sa1b-loadbench -b 4 -e 3 -s 9 -t 1 --print-ids $S > "$TMP/t1" 2>/dev/null
ok $? "3 epochs, 1 thread"
is "$(wc -l < "$TMP/t1" | tr -d ' ')" 15 "5 batches per epoch (4 4 4 4 3)"
for e in 0 1 2; do
    grep "^$e " "$TMP/t1" | cut -d' ' -f3- | tr ' ' '\n' | sort -n > "$TMP/ids$e"
    is "$(wc -l < "$TMP/ids$e" | tr -d ' ')" 19 "epoch $e: 19 ids"
    is "$(uniq "$TMP/ids$e" | wc -l | tr -d ' ')" 19 "epoch $e: all distinct"
done
cmp -s "$TMP/ids0" "$TMP/ids1"; ok $? "epochs 0 and 1 cover the same images"
[ "$(sed -n 1p "$TMP/t1" | cut -d' ' -f3-)" != "$(sed -n 6p "$TMP/t1" | cut -d' ' -f3-)" ]
ok $? "epoch 1 has another order"
is "$(sed -n 5p "$TMP/t1" | wc -w | tr -d ' ')" 5 "the short last batch holds 3 ids"

# shellcheck disable=SC2086
sa1b-loadbench -b 4 -e 3 -s 9 -t 3 -d 2 --flip 0.5 -k 3 --print-ids $S > "$TMP/t3" 2>/dev/null
cmp -s "$TMP/t1" "$TMP/t3"; ok $? "3 threads, depth 2: the same stream"
# shellcheck disable=SC2086
sa1b-loadbench -b 4 -e 3 -s 10 --print-ids $S > "$TMP/s10" 2>/dev/null
cmp -s "$TMP/t1" "$TMP/s10"; [ $? -ne 0 ]; ok $? "another seed: another stream"

for cut in 1 3 5 7 14; do
    line=$(sed -n "${cut}p" "$TMP/t1")
    ep=${line%% *}
    # position after this batch: step * 4 + count of the batch
    rest=${line#* }; step=${rest%% *}
    cnt=$(( $(echo "$line" | wc -w) - 2 ))
    pos=$(( step * 4 + cnt ))
    if [ "$pos" -ge 19 ]; then ep=$((ep + 1)); pos=0; fi
    left=$(( 3 - ep ))
    if [ "$left" -le 0 ]; then continue; fi
    # shellcheck disable=SC2086
    sa1b-loadbench -b 4 -e "$left" -s 9 -t 2 --resume "$ep:$pos" --print-ids $S > "$TMP/r" 2>/dev/null
    tail -n +$((cut + 1)) "$TMP/t1" | cmp -s - "$TMP/r"
    ok $? "resume after batch $cut ($ep:$pos) gives the rest of the stream"
done

# ranks: slices of a global batch of 3 x 2 images, in rank order
# shellcheck disable=SC2086
sa1b-loadbench -b 6 -e 2 -s 9 --print-ids $S > "$TMP/g" 2>/dev/null
for r in 0 1 2; do
    # shellcheck disable=SC2086
    sa1b-loadbench -b 2 -e 2 -s 9 --rank $r --world 3 -t $((r + 1)) --print-ids $S > "$TMP/r$r" 2>/dev/null
done
is "$(wc -l < "$TMP/r0" | tr -d ' ')" "$(wc -l < "$TMP/g" | tr -d ' ')" "every rank has as many batches as the global stream"
is "$(wc -l < "$TMP/r2" | tr -d ' ')" "$(wc -l < "$TMP/g" | tr -d ' ')" "  rank 2 too"
# join the id lists of the three ranks line by line
: > "$TMP/joined"
n=$(wc -l < "$TMP/g")
i=1
while [ $i -le "$n" ]; do
    a=$(sed -n "${i}p" "$TMP/r0"); b=$(sed -n "${i}p" "$TMP/r1"); c=$(sed -n "${i}p" "$TMP/r2")
    ids="$(echo "$a" | cut -d' ' -f3-) $(echo "$b" | cut -d' ' -f3-) $(echo "$c" | cut -d' ' -f3-)"
    echo "$(echo "$a" | cut -d' ' -f1-2) $(echo $ids)" >> "$TMP/joined"
    i=$((i + 1))
done
cmp -s "$TMP/g" "$TMP/joined"; ok $? "rank slices concatenated equal the global batches"
cat "$TMP/r0" "$TMP/r1" "$TMP/r2" | grep '^0 ' | cut -d' ' -f3- | tr ' ' '\n' | grep . | sort -n | uniq -d > "$TMP/dups"
is "$(wc -l < "$TMP/dups" | tr -d ' ')" 0 "rank slices are disjoint"

# drop-last
# shellcheck disable=SC2086
sa1b-loadbench -b 4 -e 2 --drop-last --print-ids $S > "$TMP/d" 2>/dev/null
is "$(wc -l < "$TMP/d" | tr -d ' ')" 8 "--drop-last: 4 full batches per epoch"

done_testing
