#!/bin/sh
# t1714: a run on --data shards records which shards it reads (their names,
# sizes and images) in every state file; --resume over shards that changed
# since (one removed, one added, one rewritten) is refused in one line,
# exit 3, with nothing in the run changed; over the same shards it goes on.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null || skip_all "sa1b-synth or sa1b-shard not built"
mkdir -p "$TMP/d"
for i in 1 2 3; do
    sa1b-synth -n 4 -W 240 -H 160 -m 6 -s $i --first-id $((i * 100)) -o "$TMP/t$i.tar" --quiet &&
        sa1b-shard -q --image-size 64 --mask-size 16 --keep-empty-masks -o "$TMP/d/t$i.shard" "$TMP/t$i.tar"
done
sa1b-synth -n 6 -W 240 -H 160 -m 6 -s 9 --first-id 900 -o "$TMP/t9.tar" --quiet &&
    sa1b-shard -q --image-size 64 --mask-size 16 -o "$TMP/t9.shard" "$TMP/t9.tar"
ok $? "four shards"
common="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 1 --threads 1 -q"
run_ok "a run over a glob of three shards" sa1b-train $common --steps 6 --ckpt-every 2 --log-every 1 \
    --data "$TMP/d/*.shard" --out "$TMP/b"
grep -q 'data_id.\{0,8\}3 shards, 12 images, digest [0-9a-f]\{16\}' "$TMP/b/state-4.bin"
ok $? "the state file names the shards it read"
# the same run stopped at step 4 (its checkpoint, latest and log)
mkdir -p "$TMP/a"
cp "$TMP/b/model-4.safetensors" "$TMP/b/state-4.bin" "$TMP/a/"
echo 4 >"$TMP/a/latest"
head -4 "$TMP/b/log.jsonl" >"$TMP/a/log.jsonl"
cp -r "$TMP/a" "$TMP/a0"

# the set changes: each way is refused
refused() { # LABEL
    run_status 3 "$1: --resume is refused" sa1b-train --resume "$TMP/a" -q
    grep_ok "^sa1b-train: cannot resume: the shards of --data '$TMP/d/\*.shard' changed since step 4 was saved" \
        "$TMP/.err" "$1: the line says so"
    is "$(wc -l <"$TMP/.err" | tr -d ' ')" "1" "$1: in one line"
    is "$(cat "$TMP/a/latest")" "4" "$1: the run is where it was"
    cmp -s "$TMP/a/log.jsonl" "$TMP/a0/log.jsonl"
    ok $? "$1: its log too"
}
mv "$TMP/d/t2.shard" "$TMP/t2.shard"
refused "a shard removed"
mv "$TMP/t2.shard" "$TMP/d/t2.shard"
cp "$TMP/t9.shard" "$TMP/d/t4.shard"
refused "a shard added"
rm "$TMP/d/t4.shard"
cp "$TMP/d/t3.shard" "$TMP/t3.keep"
cp "$TMP/t9.shard" "$TMP/d/t3.shard"
refused "a shard replaced by another"
cp "$TMP/t3.keep" "$TMP/d/t3.shard"

# another shard of the same name and the same size (other images; every
# mask kept, as in the run's shards, so that the sizes agree)
mkdir -p "$TMP/other" && sa1b-synth -n 4 -W 240 -H 160 -m 6 -s 77 --first-id 300 -o "$TMP/other/t3.tar" --quiet
sa1b-shard -q --image-size 64 --mask-size 16 --keep-empty-masks -o "$TMP/other/t3.shard" "$TMP/other/t3.tar"
if [ "$(stat -c %s "$TMP/other/t3.shard")" = "$(stat -c %s "$TMP/d/t3.shard")" ]; then
    cp "$TMP/other/t3.shard" "$TMP/d/t3.shard"
    refused "a shard of the same name and size, from other images"
    cp "$TMP/t3.keep" "$TMP/d/t3.shard"
else
    skip 5 "the two shards differ in size"
fi

# the same shards again (copied back: the same names and sizes)
run_ok "over the same shards, --resume goes on" sa1b-train --resume "$TMP/a" -q
is "$(cat "$TMP/a/latest")" "6" "to the run's last step"
cmp -s "$TMP/a/model-6.safetensors" "$TMP/b/model-6.safetensors"
ok $? "and ends bit-identical to the run in one go"

# synthetic batches have nothing to compare: resume as before
run_ok "a synthetic run" sa1b-train $common --steps 2 --ckpt-every 2 --synthetic-batch 5 --out "$TMP/s"
grep -q data_id "$TMP/s/state-2.bin"
ok $((! $?)) "its state has no data_id"
run_ok "and resumes" sa1b-train --resume "$TMP/s" --steps 4 -q
done_testing
