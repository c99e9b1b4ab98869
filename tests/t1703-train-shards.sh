#!/bin/sh
# t1703: sa1b-train on real shards: sa1b-synth -> sa1b-shard -> train with
# the loader, evaluate on validation shards (a bad --val fails first; the
# line after the training is --eval-only's of the last checkpoint), resume
# bit for bit; shards of source-size masks train as the packed shard at the
# model's R.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null || skip_all "sa1b-synth or sa1b-shard not built"
run_ok "synthesise" sa1b-synth -n 12 -W 240 -H 160 -m 10 -s 1 -o "$TMP/train.tar" --quiet
run_ok "synthesise validation" sa1b-synth -n 4 -W 240 -H 160 -m 10 -s 2 --first-id 500 -o "$TMP/val.tar" --quiet
run_ok "shard" sa1b-shard --image-size 64 --mask-size 16 -o "$TMP/train.shard" "$TMP/train.tar"
run_ok "shard validation" sa1b-shard --image-size 64 --mask-size 16 -o "$TMP/val.shard" "$TMP/val.tar"
common="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --batch 4 --masks 4 --points 2 --threads 2 -q"
run_ok "train on shards with --val" sa1b-train $common --steps 8 --log-every 1 --ckpt-every 4 \
    --data "$TMP/train.shard" --val "$TMP/val.shard" --out "$TMP/a"
# 15: one image of val.tar has 3 masks with a cell at R = 16 (sa1b-shard
# drops the one that vanishes there)
grep_ok '"miou": [0-9.]+, "masks": 15,' "$TMP/.out" "evaluates every validation mask once"
grep '"miou"' "$TMP/.out" >"$TMP/val.line"
is "$(cat "$TMP/a/latest")" "8" "latest names the last step"
mkdir -p "$TMP/b"
cp "$TMP/a/model-4.safetensors" "$TMP/a/state-4.bin" "$TMP/b/"
echo 4 >"$TMP/b/latest"
head -4 "$TMP/a/log.jsonl" >"$TMP/b/log.jsonl"
run_ok "resume on shards" sa1b-train $common --steps 8 --log-every 1 --ckpt-every 4 \
    --data "$TMP/train.shard" --resume "$TMP/b"
sed 's/.*"loss": \([0-9.e+-]*\),.*/\1/' "$TMP/a/log.jsonl" >"$TMP/a.loss"
sed 's/.*"loss": \([0-9.e+-]*\),.*/\1/' "$TMP/b/log.jsonl" >"$TMP/b.loss"
cmp -s "$TMP/a.loss" "$TMP/b.loss"
ok $? "resumed run continues the data stream and the losses bit for bit"
cmp -s "$TMP/a/model-8.safetensors" "$TMP/b/model-8.safetensors"
ok $? "final checkpoint bit-identical"
# --resume from another folder than the run was started in, with a
# relative --data in its record: the line says where the pattern is read
(cd "$TMP" && sa1b-train $common --steps 2 --ckpt-every 2 --data train.shard --out rel) >/dev/null 2>&1 || exit 99
mkdir "$TMP/elsewhere"
(cd "$TMP/elsewhere" && sa1b-train --resume ../rel --steps 4 -q) >/dev/null 2>"$TMP/rel.err"
is "$?" "3" "--resume from another folder, the record's --data relative: exit 3"
grep_ok "^sa1b-train: --data: .*'train.shard'.* \(the --data of the run's record, relative to the folder it was started in: resume from there, or give --data\)$" \
    "$TMP/rel.err" "one line says whose pattern it is and where it is read"
run_ok "--eval-only on shards" sa1b-train --eval-only "$TMP/a/model-8.safetensors" --batch 4 --masks 4 \
    --val "$TMP/val.shard" -q
grep_ok '"masks": 15,' "$TMP/.out" "eval-only sees every validation mask"
is "$(grep '"miou"' "$TMP/.out")" "$(cat "$TMP/val.line")" \
    "the training's --val line is --eval-only's of its last checkpoint (both at the stored SA-1B points)"
run_ok "--eval-only --export 3" sa1b-train --eval-only "$TMP/a/model-8.safetensors" --batch 4 --masks 4 \
    --val "$TMP/val.shard" --export 3 --out "$TMP/ev" -q
is "$(ls "$TMP/ev/export" | grep -c '^0000[0-2]-iou[0-9][0-9][0-9]\.png$')" "3" "three PNG overlays written"
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
    size=$(/usr/bin/python3 -c 'import sys, PIL.Image as I; print("%dx%d" % I.open(sys.argv[1]).size)' "$TMP/ev/export/00000-"*.png)
    # 240x160 images at S=64: content 64x43, enlarged 8 times to reach 512 pixels
    is "$size" "1024x344" "overlay: ground truth and prediction side by side, cropped to the image, enlarged"
fi
is "$(stat -c %a "$TMP/ev/export/00000-"*.png)" "$(printf '%o' $((0666 & ~$(umask))))" "with the mode of a new file"
# a second export into the same folder: refused, or with --overwrite the first's overlays go (never two mixed)
run_status 2 "--export again into that --out: refused" sa1b-train --eval-only "$TMP/a/model-4.safetensors" --batch 4 \
    --masks 4 --val "$TMP/val.shard" --export 2 --out "$TMP/ev" -q
grep_ok "^sa1b-train: '$TMP/ev/export' holds 3 overlays of an earlier --export: give another --out, or --overwrite to replace them$" \
    "$TMP/.err" "one line says why"
is "$(ls "$TMP/ev/export" | grep -c 'png$')" "3" "and the overlays are left as they were"
echo mine >"$TMP/ev/export/notes.txt"
run_ok "with --overwrite" sa1b-train --eval-only "$TMP/a/model-4.safetensors" --batch 4 --masks 4 \
    --val "$TMP/val.shard" --export 2 --out "$TMP/ev" -q --overwrite
is "$(ls "$TMP/ev/export" | grep -c '^0000[0-1]-iou[0-9][0-9][0-9]\.png$'):$(ls "$TMP/ev/export" | wc -l)" "2:3" \
    "the second export's two overlays replace the first's three; other files stay"
mkdir -p "$TMP/ek/export" && : >"$TMP/ek/export/00000-iou050.png.tmp-Ab12Cd" # a killed export's temporary
run_status 2 "--export into a folder a killed export left its temporary in: refused" sa1b-train --eval-only \
    "$TMP/a/model-4.safetensors" --batch 4 --masks 4 --val "$TMP/val.shard" --export 1 --out "$TMP/ek" -q
run_ok "with --overwrite" sa1b-train --eval-only "$TMP/a/model-4.safetensors" --batch 4 --masks 4 \
    --val "$TMP/val.shard" --export 1 --out "$TMP/ek" -q --overwrite
is "$(ls "$TMP/ek/export" | grep -c tmp)" "0" "the temporary is gone"
# two exports at once into one --out: the second to take the export
# folder's lock is refused (before: each had found the folder empty, and
# their overlays were mixed, both exit 0); flock(1) holds it as an export
if command -v flock >/dev/null; then
    mkdir -p "$TMP/el/export"
    flock "$TMP/el/export/.sa1b-train.lock" sa1b-train --eval-only "$TMP/a/model-4.safetensors" --batch 4 --masks 4 \
        --val "$TMP/val.shard" --export 2 --out "$TMP/el" -q >/dev/null 2>"$TMP/el.err"
    is "$?" "2" "--export into a folder another export holds: exit 2"
    grep_ok "^sa1b-train: '$TMP/el/export' is in use by another --export .*: wait for it to end, or give another --out$" \
        "$TMP/el.err" "in one line"
    is "$(ls "$TMP/el/export" | wc -l | tr -d ' ')" "0" "no overlay written"
else
    skip 3 "no flock(1)"
fi
# a shared export folder (writable by a group): another user's --export
# --overwrite into it takes the lock file the first export left (its mode
# 0644), which needs no write access (flock(2)); it was refused, exit 3,
# "cannot create '.../.sa1b-train.lock' ...: Permission denied"
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && chmod 755 "$TMP" && mkdir -p "$TMP/es" && chmod 777 "$TMP/es" &&
    as_nobody test -r "$TMP/a/model-4.safetensors" -a -r "$TMP/val.shard" -a -w "$TMP/es" 2>/dev/null; then
    sa1b-train --eval-only "$TMP/a/model-4.safetensors" --batch 4 --masks 4 --val "$TMP/val.shard" --export 2 \
        --out "$TMP/es" -q >/dev/null 2>&1 && chmod 777 "$TMP/es/export"
    as_nobody sa1b-train --eval-only "$TMP/a/model-4.safetensors" --batch 4 --masks 4 --val "$TMP/val.shard" \
        --export 1 --out "$TMP/es" -q --overwrite >/dev/null 2>"$TMP/es.err"
    is "$?:$(cat "$TMP/es.err")" "0:" "--export --overwrite by another user into a shared folder an export locked"
    is "$(ls "$TMP/es/export" | grep -c 'png$')" "1" "its overlay replaces the first's two"
else
    skip 2 "not root, no setpriv(1), or nobody cannot read the test's files"
fi
run_status 2 "--export without --eval-only" sa1b-train --export 2 --out "$TMP/x" --synthetic-batch 1
run_status 3 "shards of another S" sa1b-train --config tiny --batch 2 --masks 2 --steps 1 \
    --data "$TMP/train.shard" --out "$TMP/c" -q
grep_ok "S=64" "$TMP/.err" "the error gives the shards' geometry"
grep_ok "give the model --image-size 64, .* or shard with sa1b-shard --image-size 128 --mask-size 32\)" "$TMP/.err" \
    "and the two ways to make them agree"
# shards of source-size masks are resampled to the model's R (area, as
# sa1b-shard's default): the very batches, so the very losses, of the
# packed shard made at that R with the masks that vanish there (which the
# loader makes no valid pair of, as it does the source-size shard's)
run_ok "shard at the source size" sa1b-shard --image-size 64 --mask-size source -o "$TMP/src.shard" \
    "$TMP/train.tar"
run_ok "train on source-size masks" sa1b-train $common --steps 4 --log-every 1 \
    --data "$TMP/src.shard" --out "$TMP/s"
run_ok "shard at R, --keep-empty-masks" sa1b-shard --image-size 64 --mask-size 16 --keep-empty-masks \
    -o "$TMP/keep.shard" "$TMP/train.tar"
run_ok "the same on the packed shard" sa1b-train $common --steps 4 --log-every 1 \
    --data "$TMP/keep.shard" --out "$TMP/p"
sed 's/.*"loss": \([0-9.e+-]*\),.*/\1/' "$TMP/s/log.jsonl" >"$TMP/s.loss"
sed 's/.*"loss": \([0-9.e+-]*\),.*/\1/' "$TMP/p/log.jsonl" >"$TMP/p.loss"
cmp -s "$TMP/p.loss" "$TMP/s.loss" && [ "$(wc -l <"$TMP/s.loss")" -eq 4 ]
ok $? "the losses of the 4 steps equal those on the packed shard"

# a --val that cannot be read stops the run before its first step
run_status 3 "a --val matching nothing: exit 3" sa1b-train $common --steps 4 --data "$TMP/train.shard" \
    --val "$TMP/nothere/*.shard" --out "$TMP/nv"
grep_ok "^sa1b-train: --val: .*no shard matches" "$TMP/.err" "one line says so"
test ! -e "$TMP/nv"
ok $? "before anything is written"
sa1b-shard -q --image-size 32 --mask-size 8 -o "$TMP/v32.shard" "$TMP/val.tar" || exit 99
run_status 3 "--val shards of another S: exit 3" sa1b-train $common --steps 4 --data "$TMP/train.shard" \
    --val "$TMP/v32.shard" --out "$TMP/nv"
grep_ok "^sa1b-train: --val: .*S=32 R=8, the model needs S=64 R=16" "$TMP/.err" "one line says why"
test ! -e "$TMP/nv"
ok $? "before anything is written"

# a shard of a tar that ended early is said, then trained on as it is
head -c $(($(wc -c <"$TMP/train.tar") / 2)) "$TMP/train.tar" >"$TMP/cut.tar"
sa1b-shard -q --image-size 64 --mask-size 16 -o "$TMP/cut.shard" "$TMP/cut.tar" 2>/dev/null
is "$?" "1" "a shard of a cut tar (sa1b-shard: exit 1)"
run_ok "training on it" sa1b-train $common --steps 2 --data "$TMP/cut.shard" --out "$TMP/cut"
grep_ok "^sa1b-train: --data: 1 shard is incomplete, made from a tar that ended early \('$TMP/cut.shard'\): using the images it holds$" \
    "$TMP/.err" "one line says it is incomplete"

# an input split into parts (--max-images) of which a part is not here is
# said, then trained on as it is; all of its parts say nothing
run_ok "split into parts of 2 images" sa1b-shard -q --image-size 64 --mask-size 16 --max-images 2 -o "$TMP/split" \
    "$TMP/train.tar"
run_ok "training on every part" sa1b-train $common --steps 1 --data "$TMP/split/*.shard" --out "$TMP/sp0"
is "$(grep -c 'lacks a part' "$TMP/.err")" 0 "says nothing of parts"
mv "$TMP/split/train-00001.shard" "$TMP/"
run_ok "training without part 1" sa1b-train $common --steps 1 --data "$TMP/split/*.shard" --out "$TMP/sp1"
grep_ok "^sa1b-train: --data: 1 input split into parts lacks a part \(part 1 of the input of '$TMP/split/train-00000.shard' is not here\): using the parts that are$" \
    "$TMP/.err" "one line names the part that is not here"
mv "$TMP/train-00001.shard" "$TMP/split/"
last=$(cd "$TMP/split" && ls | tail -1)
mv "$TMP/split/$last" "$TMP/"
run_ok "training without the last part" sa1b-train $common --steps 1 --data "$TMP/split/*.shard" --out "$TMP/sp2"
grep_ok "lacks a part .part $(echo "$last" | sed 's/train-0*\([0-9]\).*/\1/') of the input" "$TMP/.err" \
    "the last part too (the highest here says it is not the last)"
done_testing
