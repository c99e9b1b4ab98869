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

# damage K: one byte of the pixels of image K of $TMP/d.shard changed
damage() {
    off=$(sa1b-inspect "$TMP/d.shard" | sed -n "s/.*\"index\": $1, .*\"image_offset\": \([0-9]*\),.*/\1/p")
    pos=$((off + 100))
    b=$(od -An -tu1 -j $pos -N1 "$TMP/d.shard" | tr -d ' ')
    # shellcheck disable=SC2059
    printf "\\$(printf %o $(((b + 1) % 256)))" | dd of="$TMP/d.shard" bs=1 seek=$pos conv=notrunc 2>/dev/null
}

# damage one image's pixels (one byte), each image in turn, until one is
# read after the first step (the loader's order decides which step reads it)
n=""
for k in $(seq 0 23); do
    damage $k
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
# a device that fails as a checkpoint's files read its memory (its downloads
# give bytes it could not read: SA1B_TEST_DEVICE makes one up on any
# backend): that checkpoint's files go, latest keeps the step before
SA1B_TEST_DEVICE=save:4 sa1b-train $common --data "$TMP/d.shard" --steps 10 --ckpt-every 2 --out "$TMP/dv" 2>"$TMP/err"
is "$?:$(cat "$TMP/dv/latest"):$(ls "$TMP/dv" | grep -c -- '-4\.')" "3:2:0" \
    "a device failed in the checkpoint of step 4: exit 3, latest at step 2, no file of step 4"
grep_ok "^sa1b-train: --backend cuda: a device error made up by SA1B_TEST_DEVICE$" "$TMP/err" "one line says the device's"
sa1b-train --resume "$TMP/dv" -q 2>/dev/null && cmp -s "$TMP/dv/model-10.safetensors" "$TMP/clean/model-10.safetensors"
ok $? "--resume ends with the weights of the run that never failed"

# Under mpirun (2 ranks; --zero 0, and 1 where each rank writes its part of
# the optimizer state): a step that fails on one rank (its slice of the
# global batch holds the damaged image) is every rank's failure, learned
# from the step's sums: the job saves the steps since the last checkpoint
# and ends, exit 3, in a line of the reason and one of the checkpoint;
# --resume goes on to the weights of a run that never failed.  Before: the
# failing rank ended at once and its launcher killed the job, every step
# since the last checkpoint lost.
if command -v mpirun >/dev/null && ldd "$BUILD/trainer/sa1b-train" 2>/dev/null | grep -q libmpi; then
    mpi_env
    mpi() { mpirun --oversubscribe --bind-to none -np 2 "$@"; }
    # --zero 0 takes the first image that fails a step after the first
    # (rank 1's), --zero 1 (with accumulation: a micro-batch of two) one
    # that fails on rank 0
    for zero in 0 1; do
        cp "$TMP/good.shard" "$TMP/d.shard"
        more="--zero $zero" on="[01]"
        [ $zero = 1 ] && more="--zero 1 --accum 2" on=0
        mpi sa1b-train $common $more --data "$TMP/d.shard" --steps 6 --ckpt-every 1 --out "$TMP/mc$zero" 2>/dev/null
        ok $? "$more: a run of 2 ranks that never fails"
        n=""
        for k in $(seq 0 23); do   # (each step reads 4 images: 2 a rank)
            cp "$TMP/good.shard" "$TMP/d.shard"
            damage $k
            rm -rf "$TMP/m$zero"
            mpi sa1b-train $common $more --collective-timeout 60 --data "$TMP/d.shard" --steps 6 --ckpt-every 100 \
                --out "$TMP/m$zero" >/dev/null 2>"$TMP/merr"
            rc=$?
            n=$(cat "$TMP/m$zero/latest" 2>/dev/null)
            [ "$rc" = 3 ] && [ -n "$n" ] && [ "$n" -ge 1 ] && grep -q "failed on rank $on:" "$TMP/merr" && break
            n=""
        done
        [ -n "$n" ]
        ok $? "$more: a damaged image read at step $((n + 1)) on rank $(sed -n 's/.*failed on rank \([0-9]*\):.*/\1/p' "$TMP/merr") ends the job, exit 3, with a checkpoint"
        is "$(grep -c "^sa1b-train: step $((n + 1)) failed on rank $on: checkpoint of step $n written (--resume $TMP/m$zero goes on from it)$" "$TMP/merr"):$(grep -c "^sa1b-train: rank $on: .*CRC32C" "$TMP/merr")" \
            "1:1" "$more: one line of the reason (the rank's), one of the checkpoint (rank 0's)"
        cmp -s "$TMP/m$zero/model-$n.safetensors" "$TMP/mc$zero/model-$n.safetensors"
        ok $? "$more: the weights of step $n are those of the run that never failed"
        if [ "$zero" = 1 ]; then
            test -s "$TMP/m1/state-$n.bin" && test -s "$TMP/m1/state-$n.r1.bin"
            ok $? "--zero 1: each rank saved its part of the optimizer state"
        fi
        cp "$TMP/good.shard" "$TMP/d.shard"
        mpi sa1b-train --resume "$TMP/m$zero" -q >/dev/null 2>&1
        ok $? "$more: --resume at 2 ranks once the shard is whole again"
        cmp -s "$TMP/m$zero/model-6.safetensors" "$TMP/mc$zero/model-6.safetensors"
        ok $? "$more: ends with the weights of the run that never failed, bit for bit"
        # rank 1's device fails after step 3 (made up: SA1B_TEST_DEVICE):
        # every rank learns it from step 4's sums; without --zero 1 rank 0
        # saves step 3, with it no rank writes a part (no whole checkpoint
        # could come of it) and latest stays at step 2
        mpi -x SA1B_TEST_DEVICE=step:3:1 sa1b-train $common $more --collective-timeout 60 --data "$TMP/d.shard" \
            --steps 6 --ckpt-every 2 --out "$TMP/dv$zero" >/dev/null 2>"$TMP/merr"
        rc=$?
        if [ $zero = 0 ]; then want="3:3:2:1" at=3; else want="3:2:0:1" at=2; fi
        is "$rc:$(cat "$TMP/dv$zero/latest"):$(ls "$TMP/dv$zero" | grep -c -- '-3\.'):$(grep -c "^sa1b-train: rank 1: --backend cuda: a device error made up" "$TMP/merr")" \
            "$want" "$more: rank 1's device fails: exit 3, latest at step $at, the reason in one line"
        mpi sa1b-train --resume "$TMP/dv$zero" -q >/dev/null 2>&1 &&
            cmp -s "$TMP/dv$zero/model-6.safetensors" "$TMP/mc$zero/model-6.safetensors"
        ok $? "$more: after rank 1's device failed, --resume ends with the weights of the run that never failed"
        if [ $zero = 1 ]; then
            # rank 1's part of step 4's checkpoint fails (its device, made
            # up at the save): one line naming rank 1 (before: each rank's
            # own, none named), no file of step 4 left (rank 0's part and
            # the model go too), latest at step 2
            mpi -x SA1B_TEST_DEVICE=save:4:1 sa1b-train $common $more --collective-timeout 60 --data "$TMP/d.shard" \
                --steps 6 --ckpt-every 2 --out "$TMP/sv" >/dev/null 2>"$TMP/serr"
            is "$?:$(cat "$TMP/sv/latest"):$(ls "$TMP/sv" | grep -c -- '-4\.'):$(grep -c '^sa1b-train' "$TMP/serr"):$(grep -c "^sa1b-train: rank 1 of 2: --backend cuda: a device error made up" "$TMP/serr")" \
                "3:2:0:1:1" "--zero 1: rank 1's part of a checkpoint fails: exit 3, latest at 2, no file of it, one line naming rank 1"
            mpi sa1b-train --resume "$TMP/sv" -q >/dev/null 2>&1 &&
                cmp -s "$TMP/sv/model-6.safetensors" "$TMP/mc1/model-6.safetensors"
            ok $? "--zero 1: --resume then ends with the weights of the run that never failed"
            # rank 0's model file of step 4 cannot be written (a folder of
            # its name): the same, one line naming rank 0, and rank 1's part
            # of the step goes too (before: rank 0 alone died, its line
            # naming no rank, and rank 1's part stayed)
            mpi sa1b-train $common $more --data "$TMP/d.shard" --steps 2 --ckpt-every 2 --out "$TMP/sm" \
                >/dev/null 2>&1 || exit 99
            mkdir -p "$TMP/sm/model-4.safetensors/x"
            mpi sa1b-train --resume "$TMP/sm" --steps 4 -q >/dev/null 2>"$TMP/smerr"
            is "$?:$(grep -c '^sa1b-train' "$TMP/smerr"):$(grep -c "^sa1b-train: rank 0 of 2: cannot write '$TMP/sm/model-4\.safetensors'" "$TMP/smerr"):$(ls "$TMP/sm" | grep -c -- '-4\..*bin'):$(cat "$TMP/sm/latest")" \
                "3:1:1:0:2" "--zero 1: rank 0's model file cannot be written: exit 3, one line naming rank 0, no part of step 4, latest at 2"
        fi
    done
else
    skip 20 "no mpirun, or sa1b-train built without MPI: the data-parallel failing step"
fi
done_testing
