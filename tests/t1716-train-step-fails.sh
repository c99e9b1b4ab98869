#!/bin/sh
# t1716: a step that cannot go on (an image of --data fails its CRC32C: bit
# rot) first saves the steps done since the last checkpoint, then ends the
# run in one line, exit 3: a checkpoint of the last whole step, which latest
# names, at the data's position when the failed step began; once the shard
# is whole again, --resume ends where a run that never failed ends, bit for
# bit.  Before: the run ended at once, every step since the last checkpoint
# lost (up to 499 with the defaults), and --resume had nothing to go on from.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null || skip_all "sa1b-synth or sa1b-shard not built"
sa1b-synth -n 24 -W 240 -H 160 -m 6 -o "$TMP/t.tar" --quiet &&
    sa1b-shard -q --image-size 64 --mask-size 16 -o "$TMP/d.shard" "$TMP/t.tar" || exit 99
cp "$TMP/d.shard" "$TMP/good.shard"
common="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 1 --threads 1 -q"
run_ok "a run that never fails" sa1b-train $common --data "$TMP/d.shard" --steps 10 --ckpt-every 1 --out "$TMP/clean"

# damage one image's pixels (one byte), each image in turn, until one is
# read after the first step (the loader's order decides which step reads it)
n=""
for k in $(seq 0 23); do
    off=$(sa1b-inspect "$TMP/d.shard" | sed -n "s/.*\"index\": $k, .*\"image_offset\": \([0-9]*\),.*/\1/p")
    pos=$((off + 100))
    b=$(od -An -tu1 -j $pos -N1 "$TMP/d.shard" | tr -d ' ')
    # shellcheck disable=SC2059
    printf "\\$(printf %o $(((b + 1) % 256)))" | dd of="$TMP/d.shard" bs=1 seek=$pos conv=notrunc 2>/dev/null
    rm -rf "$TMP/r"
    sa1b-train $common --data "$TMP/d.shard" --steps 10 --ckpt-every 100 --out "$TMP/r" 2>"$TMP/err"
    rc=$?
    n=$(cat "$TMP/r/latest" 2>/dev/null)
    [ "$rc" = 3 ] && [ -n "$n" ] && [ "$n" -ge 1 ] && break
    n=""
    cp "$TMP/good.shard" "$TMP/d.shard"
done
[ -n "$n" ]
ok $? "a damaged image read at step $((n + 1)) ends the run, exit 3"
grep_ok "^sa1b-train: step $((n + 1)) failed: checkpoint of step $n written \(--resume $TMP/r goes on from it\)$" \
    "$TMP/err" "one line says the checkpoint of step $n is written"
grep_ok "CRC32C" "$TMP/err" "and one the reason"
cmp -s "$TMP/r/model-$n.safetensors" "$TMP/clean/model-$n.safetensors"
ok $? "the weights of step $n are those of the run that never failed"
run_status 3 "--resume while the image is still damaged: exit 3" sa1b-train --resume "$TMP/r" -q
is "$(cat "$TMP/r/latest")" "$n" "and latest stays at step $n (no step done, nothing saved again)"
cp "$TMP/good.shard" "$TMP/d.shard"
run_ok "--resume once the shard is whole again" sa1b-train --resume "$TMP/r" -q
cmp -s "$TMP/r/model-10.safetensors" "$TMP/clean/model-10.safetensors"
ok $? "ends with the weights of the run that never failed, bit for bit"
done_testing
