#!/bin/sh
# t1726: a damaged last checkpoint (its model file cut short, its state
# file's header overwritten, a NaN in an older state) no longer ends
# resumption: --resume and --auto-resume go on from the newest intact
# checkpoint, in one line naming the one skipped and why, and train to the
# end bit-identical to the uninterrupted run (a finished run whose last
# checkpoint is damaged is trained to its end again, its files and latest
# written anew), also through contrib/sa1b-train.sbatch; --from-step N picks
# a checkpoint (one not there: exit 2, a damaged one: exit 3); no intact
# checkpoint: one line, exit 3, nothing changed; a latest without a step
# number: the newest intact checkpoint.
. "$top_srcdir/tests/test-lib.sh"
common="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 2 --synthetic-batch 7 --threads 2"
run="$common --steps 9 --warmup 2 --log-every 1 --ckpt-every 3"
run_ok "an uninterrupted run" sa1b-train $run -q --out "$TMP/ref"
sed 's/"images_per_s.*//' "$TMP/ref/log.jsonl" >"$TMP/ref.loss"
# same DIR: the final checkpoint, latest and the log's records as the uninterrupted run's
same() {
    cmp -s "$TMP/ref/model-9.safetensors" "$1/model-9.safetensors" && cmp -s "$TMP/ref/state-9.bin" "$1/state-9.bin" &&
        [ "$(cat "$1/latest")" = 9 ] && sed 's/"images_per_s.*//' "$1/log.jsonl" | cmp -s - "$TMP/ref.loss"
}
copy() { rm -rf "$TMP/$1" && cp -r "$TMP/ref" "$TMP/$1"; }
# garble FILE: 8 bytes of its safetensors header overwritten
garble() { printf 'garbage!' | dd of="$1" bs=1 seek=20 conv=notrunc 2>/dev/null; }

# a finished run whose last model file is cut short: --resume
copy a && truncate -s 5000 "$TMP/a/model-9.safetensors"
run_ok "--resume, the last model file cut short" sa1b-train --resume "$TMP/a"
is "$(grep -vc '^step [0-9]*/9 ' "$TMP/.err")" "2" "one line before the startup line (and the progress lines)"
grep_ok "^sa1b-train: the checkpoint of step 9 in '$TMP/a' is damaged \('$TMP/a/model-9.safetensors': .*5000 bytes\): resuming from step 6, the newest intact one$" \
    "$TMP/.err" "names the checkpoint skipped, the file and why, and the step it goes on from"
grep_ok "^sa1b-train: resuming $TMP/a, step 6 of 9" "$TMP/.err" "then resumes from step 6"
same "$TMP/a"
ok $? "trained to its end again: the last checkpoint, latest and the log as the uninterrupted run's"

# its state file garbled, the state of step 6 with a NaN: --auto-resume goes back to step 3
copy b && garble "$TMP/b/state-9.bin" &&
    sa1b-train $common --steps 6 --warmup 2 --log-every 1 --ckpt-every 3 -q --out "$TMP/nan" || exit 99
if [ -x /usr/bin/python3 ]; then
    /usr/bin/python3 - "$TMP/b/state-6.bin" <<'EOF' || exit 99
import json, struct, sys
with open(sys.argv[1], "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    head = json.loads(f.read(n))
    t = next(v for k, v in head.items() if k.startswith("adam.v."))
    f.seek(8 + n + t["data_offsets"][0] + 4)
    f.write(struct.pack("<f", float("nan")))
EOF
    run_ok "--auto-resume, state 9 garbled and a NaN in state 6" sa1b-train $run --auto-resume --out "$TMP/b"
    grep_ok "^sa1b-train: the checkpoints of steps 9 and 6 in '$TMP/b' are damaged \(the newest: '$TMP/b/state-9.bin': .*\): resuming from step 3, the newest intact one$" \
        "$TMP/.err" "one line names both and why the newest is"
    grep_ok "^sa1b-train: resuming $TMP/b, step 3 of 9" "$TMP/.err" "then resumes from step 3"
    same "$TMP/b"
    ok $? "bit-identical to the uninterrupted run"
else
    skip 4 "no /usr/bin/python3"
fi

# through the Slurm recipe (its exit 3 would not be requeued): a finished run, its last state cut
copy s && truncate -s 100 "$TMP/s/state-9.bin"
sh "$SRC/contrib/sa1b-train.sbatch" "$TMP/s" $run -q >"$TMP/s.out" 2>"$TMP/s.err"
is "$?" "0" "contrib/sa1b-train.sbatch over a damaged last checkpoint: exit 0"
same "$TMP/s"
ok $? "the run trained to its end again, bit for bit"

# --from-step
copy f
run_ok "--from-step 3" sa1b-train --resume "$TMP/f" --from-step 3 -q
same "$TMP/f"
ok $? "goes on from step 3 to the same end"
run_status 2 "--from-step 4: no such checkpoint" sa1b-train --resume "$TMP/f" --from-step 4 -q
is "$(cat "$TMP/.err")" "sa1b-train: --from-step 4: '$TMP/f' has no checkpoint of step 4 (model-4.safetensors and state-4.bin); it has steps 9, 6 and 3" \
    "one line lists the steps it has"
garble "$TMP/f/model-6.safetensors"
run_status 3 "--from-step 6, damaged" sa1b-train --resume "$TMP/f" --from-step 6 -q
grep_ok "^sa1b-train: --from-step 6: the checkpoint of step 6 in '$TMP/f' is damaged \('$TMP/f/model-6.safetensors': .*\)$" \
    "$TMP/.err" "one line says why"
is "$(grep -c . "$TMP/.err")" "1" "(one)"
run_status 2 "--from-step without --resume" sa1b-train $run --from-step 3 -q --out "$TMP/f2"
run_status 2 "--from-step with --auto-resume" sa1b-train $run --from-step 3 -q --auto-resume --out "$TMP/f"
grep_ok "^sa1b-train: --from-step N picks the checkpoint that --resume DIR continues from: it needs --resume \(not --auto-resume\)$" \
    "$TMP/.err" "saying what it is for"

# a byte of a tensor's name flipped in the last model file: its header still
# JSON, the tensor missing
copy r && sed -i '1s/"enc\.patch\.b"/"enc\.patch\.c"/' "$TMP/r/model-9.safetensors"
grep -q 'enc.patch.c' "$TMP/r/model-9.safetensors" || { echo "Bail out! the name was not changed"; exit 99; }
run_ok "--resume, a tensor's name flipped in the last model file" sa1b-train --resume "$TMP/r" -q
is "$(cat "$TMP/.err")" "sa1b-train: the checkpoint of step 9 in '$TMP/r' is damaged ('$TMP/r/model-9.safetensors': tensor 'enc.patch.b' missing): resuming from step 6, the newest intact one" \
    "one line names the tensor missing"
same "$TMP/r"
ok $? "trained to its end again, bit for bit"

# and one of an optimizer state's name in the last state file
copy r2 && sed -i '1s/"adam\.v\.enc\.patch\.b"/"adam\.v\.enc\.patch\.c"/' "$TMP/r2/state-9.bin"
grep -q 'adam.v.enc.patch.c' "$TMP/r2/state-9.bin" || { echo "Bail out! the name was not changed"; exit 99; }
run_ok "--resume, a state's name flipped in the last state file" sa1b-train --resume "$TMP/r2" -q
grep_ok "^sa1b-train: the checkpoint of step 9 in '$TMP/r2' is damaged \('$TMP/r2/state-9.bin': tensor 'adam\.v\.enc\.patch\.(b' missing|c' is no optimizer state of a parameter)\): resuming from step 6, the newest intact one$" \
    "$TMP/.err" "one line names the state"
same "$TMP/r2"
ok $? "trained to its end again, bit for bit"

# no intact checkpoint: exit 3, one line, nothing changed
copy n && for s in 3 6 9; do truncate -s 100 "$TMP/n/model-$s.safetensors"; done
(cd "$TMP/n" && ls && cksum ./*) >"$TMP/before"
run_status 3 "--resume with every checkpoint damaged" sa1b-train --resume "$TMP/n" -q
grep_ok "^sa1b-train: cannot resume from '$TMP/n': no intact checkpoint \(steps 9, 6 and 3 damaged: '$TMP/n/model-9.safetensors': .*\)$" \
    "$TMP/.err" "one line says so"
is "$(grep -c . "$TMP/.err")" "1" "(one)"
(cd "$TMP/n" && ls && cksum ./*) | cmp -s - "$TMP/before"
ok $? "and nothing changed"

# a latest that holds no step number, the run not finished
copy l && echo 'x' >"$TMP/l/latest" && rm "$TMP/l/model-9.safetensors" "$TMP/l/state-9.bin"
run_ok "--resume, latest without a step number" sa1b-train --resume "$TMP/l" -q
is "$(cat "$TMP/.err")" "sa1b-train: '$TMP/l/latest' holds no step number; resuming from step 6, the newest checkpoint" \
    "one line says so"
same "$TMP/l"
ok $? "and the run ends as the uninterrupted one"
# --zero 1 under mpirun: a rank's part of the optimizer state cut short
if command -v mpirun >/dev/null; then
    mpi_env
    z="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 2 --synthetic-batch 7 --threads 1 -q"
    z="$z --steps 6 --ckpt-every 3 --zero 1"
    mpi() { mpirun --oversubscribe --bind-to none -np 2 "$@"; }
    mpi sa1b-train $z --out "$TMP/z" >/dev/null 2>&1 && cp -r "$TMP/z" "$TMP/z2" && truncate -s 100 "$TMP/z2/state-6.r1.bin"
    ok $? "mpirun -np 2 --zero 1: a run, then rank 1's part of its last state cut short"
    mpi sa1b-train --resume "$TMP/z2" -q >/dev/null 2>"$TMP/z2.err"
    ok $? "its --resume goes on"
    grep_ok "^sa1b-train: the checkpoint of step 6 in '$TMP/z2' is damaged \('$TMP/z2/state-6.r1.bin': .*\): resuming from step 3, the newest intact one$" \
        "$TMP/z2.err" "one line (rank 0's) names the part"
    is "$(grep -c . "$TMP/z2.err")" "1" "(one)"
    cmp -s "$TMP/z/model-6.safetensors" "$TMP/z2/model-6.safetensors" && cmp -s "$TMP/z/state-6.bin" "$TMP/z2/state-6.bin" &&
        cmp -s "$TMP/z/state-6.r1.bin" "$TMP/z2/state-6.r1.bin"
    ok $? "and ends bit-identical, each rank's part too"
else
    skip 5 "no mpirun"
fi
done_testing
