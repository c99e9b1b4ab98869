#!/bin/sh
# t1770: data-parallel training under mpirun (Open MPI, CPU backend, two
# ranks on one machine).  N=2 ranks of batch B make the update of one
# process of batch 2B (a large --adam-eps makes the first update linear in
# the gradient, so the ranks' reduction order shows as noise, not as +-lr),
# with accumulation and in bf16; several default steps give the same
# losses; a run resumed at N=2 is bit-identical to the one in one go; a
# different number of processes is refused on resume (--auto-resume also
# over a --zero 1 first checkpoint cut between the ranks' parts); --zero 1
# reduce-scatters the gradients and agrees with --zero 0 where clipping
# and fp16's skipped steps read them; a rank that hangs
# ends the job after --collective-timeout, a rank that dies ends it too;
# ranks that read other shards, or a rank whose --data or rank 0's --val
# matches nothing, end it at once in one line; --overwrite removes nothing
# when a rank other than 0 cannot start.
. "$top_srcdir/tests/test-lib.sh"
PY=/usr/bin/python3
command -v mpirun >/dev/null || skip_all "no mpirun (Debian: openmpi-bin)"
ldd "$BUILD/trainer/sa1b-train" 2>/dev/null | grep -q libmpi || skip_all "sa1b-train built without MPI"
"$PY" -c 'import numpy' 2>/dev/null || skip_all "no numpy for /usr/bin/python3"
mpi_env # (as root in CI, Open MPI's allocations suppressed under LeakSanitizer)
mpi() { mpirun --oversubscribe --bind-to none -np 2 "$@"; }

cat > "$TMP/upd.py" <<'PYEOF'
import json, struct, sys
import numpy as np
def load(p):
    with open(p, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        d = f.read()
    h.pop("__metadata__", None)
    return {k: np.frombuffer(d[v["data_offsets"][0]:v["data_offsets"][1]], dtype=np.float32) for k, v in h.items()}
w0, a, b = (load(p) for p in sys.argv[1:4])
ua = np.concatenate([a[k].astype(np.float64) - w0[k] for k in sorted(w0)])
ub = np.concatenate([b[k].astype(np.float64) - w0[k] for k in sorted(w0)])
r = np.linalg.norm(ua - ub) / np.linalg.norm(ua)
print("%.3g" % r)
sys.exit(0 if np.linalg.norm(ua) > 0 and r <= float(sys.argv[4]) else 1)
PYEOF

one="--config tiny --masks 4 --points 2 --synthetic-batch 5 --threads 1 -q --warmup 0 --adam-eps 1 --steps 1 --ckpt-every 1"
# name : one process's options : each of 2 ranks' options : tolerance.  A
# micro-batch of the ranks' global batch is one of the process (the
# synthetic batches are cut per micro-batch).  bf16 against one batch of 4:
# the loss gradient of a micro-batch of many pairs is scaled by 1/pairs (not
# a power of 2) before it is rounded to bf16, that of a rank's sum is not,
# so values at a rounding boundary go the other way (1e-3); against the
# same sum in one process (accumulation) the ranks agree as closely as fp32.
for case in "fp32:--batch 4:--batch 2:1e-4" "fp32 accumulation:--batch 2 --accum 2:--batch 1 --accum 2:1e-4" \
            "bf16:--batch 4 --precision bf16:--batch 2 --precision bf16:1e-3" \
            "bf16 against the sum:--batch 2 --accum 2 --precision bf16:--batch 1 --accum 2 --precision bf16:1e-4"; do
    name=${case%%:*}; rest=${case#*:}; single=${rest%%:*}; rest=${rest#*:}; ranks=${rest%%:*}; tol=${rest#*:}
    d="$TMP/$(echo "$name" | tr ' ' _)"
    sa1b-train $one $single --lr 0 --out "$d.w0" 2>/dev/null   # the initial weights
    sa1b-train $one $single --out "$d.n1" 2>/dev/null
    mpi sa1b-train $one $ranks --out "$d.n2" >"$d.log" 2>&1
    ok $? "$name: mpirun -np 2 sa1b-train $ranks"
    r=$("$PY" "$TMP/upd.py" "$d.w0/model-1.safetensors" "$d.n1/model-1.safetensors" "$d.n2/model-1.safetensors" $tol)
    ok $? "$name: the update of 2 ranks x ($ranks) is that of one process x ($single) (relative L2 $r <= $tol)"
done

# several steps with the default settings: the same losses
five="--config tiny --masks 4 --points 2 --synthetic-batch 7 --threads 1 -q --steps 5 --log-every 1 --ckpt-every 5"
sa1b-train $five --batch 4 --out "$TMP/l1" 2>/dev/null
mpi sa1b-train $five --batch 2 --out "$TMP/l2" >"$TMP/l2.log" 2>&1
ok $? "5 default steps on 2 ranks"
"$PY" "$SRC/tests/losses_agree.py" "$TMP/l1/log.jsonl" "$TMP/l2/log.jsonl" 5 1e-3
ok $? "the losses of 5 steps agree to 1e-3"
test ! -e "$TMP/l2/log.jsonl.1" && test "$(wc -l < "$TMP/l2/log.jsonl")" -eq 5
ok $? "rank 0 alone writes the log (5 lines)"

# resume at N=2 (stopped by SIGTERM after step 2 on every rank: the ranks
# agree on the stop at the next step): bit-identical to the run in one go;
# another N refused
mpi sa1b-train $five --steps 4 --ckpt-every 2 --batch 2 --out "$TMP/g" >/dev/null 2>&1
mpi -x SA1B_TEST_KILL=step:2 sa1b-train $five --steps 4 --ckpt-every 2 --batch 2 --out "$TMP/r" >/dev/null 2>&1
is "$?" 130 "SIGTERM on every rank: the job stops with a checkpoint (exit 130)"
mpi sa1b-train --resume "$TMP/r" --threads 1 -q >"$TMP/r.log" 2>&1
ok $? "resume at 2 ranks"
cmp -s "$TMP/g/model-4.safetensors" "$TMP/r/model-4.safetensors" && cmp -s "$TMP/g/state-4.bin" "$TMP/r/state-4.bin"
ok $? "the resumed run ends bit-identical to the one in one go"
run_status 2 "resume with one process refused" sa1b-train --resume "$TMP/r" --steps 6 --threads 1 -q
grep_ok "trained by 2 processes and this job has 1" "$TMP/.err" "the message names both"
mpirun --oversubscribe --bind-to none -np 3 sa1b-train --resume "$TMP/r" --steps 6 --threads 1 -q >/dev/null 2>"$TMP/r3.err"
is "$?:$(grep -c 'was trained by 2 processes and this job has 3' "$TMP/r3.err")" "2:1" \
    "resume with three processes refused, in one line for the job (rank 0's)"
# --auto-resume at N=2: the same command stopped after step 2 (or 3) and run
# again continues on every rank, bit-identical to the run in one go
mpi -x SA1B_TEST_KILL=step:2 sa1b-train $five --steps 4 --ckpt-every 2 --batch 2 --auto-resume --out "$TMP/ar" \
    >/dev/null 2>&1
st=$?
is "$st:$(cat "$TMP/ar/latest" | tr 23 xx)" "130:x" "--auto-resume at 2 ranks: stopped with a checkpoint (the ranks agree on step 2 or 3)"
mpi sa1b-train $five --steps 4 --ckpt-every 2 --batch 2 --auto-resume --out "$TMP/ar" >"$TMP/ar.log" 2>&1
ok $? "the same command again continues it"
cmp -s "$TMP/g/model-4.safetensors" "$TMP/ar/model-4.safetensors" && cmp -s "$TMP/g/state-4.bin" "$TMP/ar/state-4.bin"
ok $? "--auto-resume at 2 ranks ends bit-identical to the run in one go"
# a folder --auto-resume refuses (another program's log): one line for the job
mkdir "$TMP/arn" && echo '{"event": 1}' >"$TMP/arn/log.jsonl"
mpi sa1b-train $five --steps 4 --batch 2 --auto-resume --out "$TMP/arn" >/dev/null 2>"$TMP/arn.err"
is "$?:$(grep -c "^sa1b-train: output folder '$TMP/arn' has no checkpoint" "$TMP/arn.err"):$(cat "$TMP/arn/log.jsonl")" \
    '2:1:{"event": 1}' "--auto-resume refused at 2 ranks: exit 2, one line, the log kept"
# ranks that do not see the same run (here: rank 1 given another --out, as
# a node whose --out is not the shared one): the job ends at once in one
# line, never training rank 0's run on with a rank that started afresh
cp -r "$TMP/g" "$TMP/gs" && cksum "$TMP/gs"/* >"$TMP/gs.before"
mpirun --oversubscribe --bind-to none -np 1 sa1b-train $five --steps 6 --ckpt-every 2 --batch 2 --auto-resume --out "$TMP/gs" : \
    -np 1 sa1b-train $five --steps 6 --ckpt-every 2 --batch 2 --auto-resume --out "$TMP/gs-other" >/dev/null 2>"$TMP/gs.err"
is "$?:$(grep -c "^sa1b-train: rank 1 of 2 does not see the run that rank 0 does: rank 0 continues from step 4, rank 1 starts a new one in '$TMP/gs-other'" "$TMP/gs.err")" "3:1" \
    "ranks that see different runs: exit 3, one line naming the rank"
# ... the same step of two different runs (other settings: here --seed)
mpi sa1b-train $five --steps 4 --ckpt-every 2 --batch 2 --seed 9 --out "$TMP/gs2" >/dev/null 2>&1
cksum "$TMP/gs2"/* >"$TMP/gs2.before"
mpirun --oversubscribe --bind-to none -np 1 sa1b-train $five --steps 6 --ckpt-every 2 --batch 2 --resume "$TMP/gs" : \
    -np 1 sa1b-train $five --steps 6 --ckpt-every 2 --batch 2 --seed 9 --auto-resume --out "$TMP/gs2" >/dev/null 2>"$TMP/gs2.err"
is "$?:$(grep -c "rank 1 of 2 does not see the run that rank 0 does: rank 0 continues from step 4, rank 1 too, with other settings" "$TMP/gs2.err")" "3:1" \
    "the same step of another run: refused too"
cksum "$TMP/gs"/* | cmp -s - "$TMP/gs.before" && test ! -e "$TMP/gs-other" && cksum "$TMP/gs2"/* | cmp -s - "$TMP/gs2.before"
ok $? "and nothing written"

# a signal to a rank other than 0 after its training, while rank 0 still
# writes the last checkpoint (its rename held 4 s by strace): that rank
# waits for rank 0 at the job's end; it exited 130 at once, the launcher
# then killed rank 0 in the middle of it (no latest: every step lost)
if command -v strace >/dev/null &&
    strace -qq -o /dev/null -e trace=rename -e inject=rename:delay_enter=1:when=1 true 2>/dev/null; then
    T=$BUILD/trainer/sa1b-train
    mpirun --oversubscribe --bind-to none -np 1 strace -qq -o /dev/null -e trace=rename,renameat,renameat2 \
        -e inject=rename,renameat,renameat2:delay_enter=4000000:when=1 "$T" $five --batch 2 --out "$TMP/sg" : \
        -np 1 "$T" $five --batch 2 --out "$TMP/sg" >"$TMP/sg.log" 2>&1 &
    mp=$!
    i=0
    until ls "$TMP/sg" 2>/dev/null | grep -q 'model-5.*tmp' || [ $i -ge 600 ]; do sleep 0.1; i=$((i + 1)); done
    p1=$(ps -eo pid=,ppid=,comm= | awk -v p=$mp '$2 == p && $3 == "sa1b-train" {print $1}')
    [ -n "$p1" ] && kill -TERM $p1
    wait $mp
    is "$?:$(cat "$TMP/sg/latest" 2>/dev/null):${p1:+signalled}" "0:5:signalled" \
        "SIGTERM to rank 1 while rank 0 writes the last checkpoint: the job ends when it is written (exit 0, latest 5)"
else
    skip 1 "no strace (Debian: strace)"
fi

# --zero 1: each rank keeps its part of the optimizer state, receives the
# sum of its part of the gradients and gathers the others' weights: the
# same weights as --zero 0, about half the state on each of two ranks, and
# an exact resume from the parts
z="--config tiny --masks 4 --points 2 --synthetic-batch 5 --threads 1 -q --steps 4 --ckpt-every 2 --batch 2"
mpi --output-filename "$TMP/zq" sa1b-train $z --memory-report --out "$TMP/z0" >/dev/null 2>&1
mpi --output-filename "$TMP/zo" sa1b-train $z --memory-report --zero 1 --out "$TMP/z1" >/dev/null 2>&1
ok $? "--zero 1 on 2 ranks"
cmp -s "$TMP/z0/model-4.safetensors" "$TMP/z1/model-4.safetensors"
ok $? "--zero 1 gives the weights of --zero 0, bit for bit"
test -s "$TMP/z1/state-4.bin" && test -s "$TMP/z1/state-4.r1.bin"
ok $? "each rank writes its part of the state (state-4.bin, state-4.r1.bin)"
o0=$(cat "$TMP"/zq/*/rank.*/stderr | sed -n 's/^peak bytes: .*optimizer=\([0-9]*\).*/\1/p' | sort -n | tail -1)
o1=$(cat "$TMP"/zo/*/rank.*/stderr | sed -n 's/^peak bytes: .*optimizer=\([0-9]*\).*/\1/p' | sort -n | tail -1)
r0=$(cat "$TMP"/zo/*/rank.0/stderr | sed -n 's/^peak bytes: .*optimizer=\([0-9]*\).*/\1/p')
test -n "$o0" && test -n "$o1" && test $((o1 * 10)) -le $((o0 * 6))
ok $? "the largest rank's optimizer state: $o1 bytes against $o0 (at most 60%)"
sa1b-train $z --zero 1 --ranks 2 --plan >"$TMP/zp.out" 2>&1
p0=$(sed -n 's/^predicted: .* optimizer=\([0-9]*\).*/\1/p' "$TMP/zp.out")
test -n "$p0" && test "$p0" = "$r0"
ok $? "--plan --zero 1 --ranks 2 predicts rank 0's optimizer state ($p0 bytes, measured ${r0:-?})"
mpi -x SA1B_TEST_KILL=step:2 sa1b-train $z --zero 1 --out "$TMP/zr" >/dev/null 2>&1
mpi sa1b-train --resume "$TMP/zr" --threads 1 -q >/dev/null 2>&1
ok $? "--zero 1: resume from the parts"
cmp -s "$TMP/z1/model-4.safetensors" "$TMP/zr/model-4.safetensors" && cmp -s "$TMP/z1/state-4.r1.bin" "$TMP/zr/state-4.r1.bin"
ok $? "--zero 1: the resumed run ends bit-identical to the one in one go"
# a first checkpoint cut between the ranks' parts (killed after rank 0's
# state file, before rank 1's part and latest): no resume can read it, so
# --auto-resume starts the run over it (one line) and ends bit-identical;
# with no log of the run beside it, it is refused and kept
mkdir "$TMP/zc" "$TMP/zn"
cp "$TMP/z1/model-2.safetensors" "$TMP/z1/state-2.bin" "$TMP/zc/"
cp "$TMP/z1/model-2.safetensors" "$TMP/z1/state-2.bin" "$TMP/zn/"
grep '^{"step": [12],' "$TMP/z1/log.jsonl" >"$TMP/zc/log.jsonl"
mpi sa1b-train $z --zero 1 --auto-resume --out "$TMP/zc" >/dev/null 2>"$TMP/zc.err"
st=$?
is "$st:$(grep -c "as it wrote its first checkpoint (that of step 2 lacks a file of a rank's" "$TMP/zc.err")" "0:1" \
    "--zero 1 --auto-resume: a new run over a first checkpoint cut between the ranks' parts (one line)"
cmp -s "$TMP/z1/model-4.safetensors" "$TMP/zc/model-4.safetensors" && cmp -s "$TMP/z1/state-4.r1.bin" "$TMP/zc/state-4.r1.bin"
ok $? "--zero 1 --auto-resume: that run ends bit-identical to the one in one go"
# the other orders of that cut (rank 1 writes its part while rank 0 writes
# the model, then state-2.bin): rank 1's part with the model file, or alone
for cut in "model-2.safetensors state-2.r1.bin" "state-2.r1.bin"; do
    rm -rf "$TMP/zc"
    mkdir "$TMP/zc"
    for f in $cut; do cp "$TMP/z1/$f" "$TMP/zc/"; done
    grep '^{"step": [12],' "$TMP/z1/log.jsonl" >"$TMP/zc/log.jsonl"
    mpi sa1b-train $z --zero 1 --auto-resume --out "$TMP/zc" >/dev/null 2>"$TMP/zc.err"
    st=$?
    cmp -s "$TMP/z1/model-4.safetensors" "$TMP/zc/model-4.safetensors"
    is "$st:$?:$(grep -c "as it wrote its first checkpoint (that of step 2" "$TMP/zc.err")" "0:0:1" \
        "--zero 1 --auto-resume: a new run over a first checkpoint cut to $cut, bit-identical"
done
mpi sa1b-train $z --zero 1 --auto-resume --out "$TMP/zn" >/dev/null 2>"$TMP/zn.err"
st=$?
is "$st:$(grep -c "holds 'model-2.safetensors'" "$TMP/zn.err"):$(ls "$TMP/zn" | tr '\n' ' ')" \
    "2:1:model-2.safetensors state-2.bin " "--zero 1 --auto-resume: such a cut checkpoint with no log of the run is refused, kept"

# --zero 1 moves the gradients with a reduce-scatter (each rank receives the
# sum of its own part: one MPI_Reduce to each part's rank), not an
# all-reduce: the floats each rank hands to MPI's collectives, counted by a
# PMPI shim the ranks preload (4 steps: the gradient's floats 4 times in
# MPI_Reduce, the weights' 4 times in MPI_Allgatherv, no float in
# MPI_Allreduce; --zero 0 all-reduces them)
shim=$BUILD/tests/.libs/libmpicount.so
if [ -f "$shim" ]; then
    # (verify_asan_link_order=0: a sanitized sa1b-train wants ASan's runtime
    # first among its libraries, and the preloaded shim comes before it)
    for k in 0 1; do
        mpi -x LD_PRELOAD="$shim" -x SA1B_MPI_COUNT="$TMP/count$k" \
            -x ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
            sa1b-train $z --zero $k --ckpt-every 4 --out "$TMP/cz$k" >/dev/null 2>&1
    done
    floats() { sed -n "s/^$2 \([0-9]*\) .*/\1/p" "$TMP/count$1.$3"; }
    g=$(floats 0 allreduce 0)
    test -n "$g" && test "$g" -gt 0 && test "$(floats 0 reduce 0)" = 0
    ok $? "--zero 0: the gradients all-reduced ($g floats over 4 steps), none reduced"
    for r in 0 1; do
        test "$(floats 1 allreduce $r)" = 0 && test "$(floats 1 reduce $r)" = "$g" &&
            test "$(floats 1 allgatherv $r)" -gt 0
        ok $? "--zero 1, rank $r: the gradients reduce-scattered ($(floats 1 reduce $r) floats reduced), the weights gathered ($(floats 1 allgatherv $r)), no float all-reduced ($(floats 1 allreduce $r))"
    done
else
    skip "no PMPI shim (tests/libmpicount.la) to count the collectives' floats"
fi

# what reads the gradients after the reduce-scatter reads a rank's own part
# and adds up the ranks' sums of squares: with clipping at work and
# accumulation (a norm of a rank's part alone would clip each part by
# another factor: relative L2 8e-3 in a trial without accumulation) the
# update of --zero 1 is that of --zero 0; in fp16 with overflowing steps
# (--lr 1 makes them) and the encoder frozen (the gradients start after
# it, inside rank 0's part) the ranks skip the steps --zero 0 skips and end
# with its weights and loss scales (ranks that disagreed would leave one
# waiting in the gather: --collective-timeout ends that)
c="--config tiny --masks 4 --points 2 --synthetic-batch 5 --threads 1 -q --batch 1 --accum 2 --warmup 0 --adam-eps 1"
c="$c --steps 1"
sa1b-train $c --lr 0 --out "$TMP/cw0" 2>/dev/null
for k in 0 1; do
    mpi sa1b-train $c --clip 0.01 --zero $k --out "$TMP/cc$k" >/dev/null 2>&1
done
n=$(sed -n 's/.*"grad_norm": \([0-9.e+-]*\).*/\1/p' "$TMP/cc1/log.jsonl")
awk -v n="${n:-0}" 'BEGIN { exit !(n > 0.05) }'
ok $? "--clip 0.01 clips (the gradient norm is $n)"
r=$("$PY" "$TMP/upd.py" "$TMP/cw0/model-1.safetensors" "$TMP/cc0/model-1.safetensors" "$TMP/cc1/model-1.safetensors" 1e-4)
ok $? "--zero 1 with clipping: the update of --zero 0 (relative L2 $r <= 1e-4)"
f="--config tiny --masks 4 --points 2 --synthetic-batch 5 --threads 1 -q --batch 2 --warmup 0 --steps 5 --log-every 1"
f="$f --ckpt-every 5 --precision fp16 --lr 1 --freeze encoder --collective-timeout 60"
for k in 0 1; do
    mpi sa1b-train $f --zero $k --out "$TMP/cf$k" >/dev/null 2>&1
    ok $? "fp16 --lr 1 --zero $k on 2 ranks"
    sed -n 's/.*\("scale": [^,}]*\)\(, "skipped": true\)*.*/\1\2/p' "$TMP/cf$k/log.jsonl" > "$TMP/cf$k.scales"
done
grep -q skipped "$TMP/cf1.scales" && cmp -s "$TMP/cf0.scales" "$TMP/cf1.scales"
ok $? "--zero 1 skips the overflowing steps of --zero 0 ($(grep -c skipped "$TMP/cf1.scales") of 5)"
r=$("$PY" "$TMP/upd.py" "$TMP/cw0/model-1.safetensors" "$TMP/cf0/model-5.safetensors" "$TMP/cf1/model-5.safetensors" 1e-4)
ok $? "fp16: --zero 1 ends with the weights of --zero 0 (relative L2 of the change $r <= 1e-4)"

# a rank that hangs (stopped) or dies ends the job, in one line from a rank
# that waited; generous bounds, not timings
hang="--config tiny --batch 2 --masks 4 --synthetic-batch 5 --steps 100000 --threads 1 -q --collective-timeout 5"
T=$BUILD/trainer/sa1b-train
timeout -s KILL 120 mpirun --oversubscribe --bind-to none -np 1 "$T" $hang --out "$TMP/h" : -np 1 \
    sh -c "'$T' $hang --out '$TMP/h' & p=\$!; sleep 3; kill -STOP \$p; wait \$p" >"$TMP/h.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 137 ] && grep -q "did not complete within 5 s" "$TMP/h.log"
ok $? "a stopped rank: the job ends (exit $rc) with the waiting rank's line"
timeout -s KILL 120 mpirun --oversubscribe --bind-to none -np 1 "$T" $hang --out "$TMP/k" : -np 1 \
    sh -c "'$T' $hang --out '$TMP/k' & p=\$!; sleep 3; kill -KILL \$p; wait \$p" >"$TMP/k.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 137 ] || [ "$(grep -c . "$TMP/k.log")" -gt 0 ]
ok $? "a killed rank: the job ends (exit $rc)"

# ranks that read other shards under one --data (a relative pattern run from
# another working directory, a folder not shared): the job ends at once in
# one line naming the rank, never training on two data sets; a rank whose
# pattern matches nothing, and a --val that matches nothing, end it in one
# line too, not after a collective timeout
if command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null; then
    mkdir -p "$TMP/ds/out" "$TMP/ds2/out" "$TMP/ds3"
    { sa1b-synth -n 6 -W 120 -H 80 -m 4 -s 1 -o "$TMP/ds/a.tar" --quiet &&
        sa1b-synth -n 4 -W 120 -H 80 -m 4 -s 2 --first-id 50 -o "$TMP/ds/b.tar" --quiet &&
        sa1b-shard -q --image-size 64 --mask-size 16 -o "$TMP/ds/out" "$TMP/ds/a.tar" "$TMP/ds/b.tar"; } || exit 99
    cp "$TMP/ds/out/a.shard" "$TMP/ds2/out/"
    sa="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 1 --threads 1 -q --steps 2"
    # shellcheck disable=SC2086
    mpirun --oversubscribe --bind-to none -np 1 --wdir "$TMP/ds" sa1b-train $sa --data 'out/*.shard' --out "$TMP/dsr" : \
        -np 1 --wdir "$TMP/ds2" sa1b-train $sa --data 'out/*.shard' --out "$TMP/dsr" >/dev/null 2>"$TMP/ds.err"
    is "$?:$(grep -c "^sa1b-train: rank 1 of 2 reads other shards than rank 0 under --data 'out/\*\.shard': rank 0 2 shards of 10 images, rank 1 1 of 6 " "$TMP/ds.err"):$(grep -c '^sa1b-train' "$TMP/ds.err")" \
        "3:1:1" "ranks that read other shards: exit 3, one line naming the rank"
    test ! -e "$TMP/dsr"
    ok $? "and nothing written"
    # shellcheck disable=SC2086
    mpirun --oversubscribe --bind-to none -np 1 --wdir "$TMP/ds" sa1b-train $sa --data 'out/*.shard' --out "$TMP/dsr" : \
        -np 1 --wdir "$TMP/ds3" sa1b-train $sa --data 'out/*.shard' --out "$TMP/dsr" >/dev/null 2>"$TMP/ds3.err"
    is "$?:$(grep -c "^sa1b-train: rank 1 of 2: --data: loader: 'out/\*\.shard': no shard matches$" "$TMP/ds3.err"):$(grep -c '^sa1b-train' "$TMP/ds3.err")" \
        "3:1:1" "a rank whose pattern matches nothing: exit 3, one line naming the rank"
    # shellcheck disable=SC2086
    mpi sa1b-train $sa --data "$TMP/ds/out/*.shard" --val "$TMP/none-*.shard" --collective-timeout 2 --out "$TMP/dv" \
        >/dev/null 2>"$TMP/dv.err"
    is "$?:$(grep -c "^sa1b-train: --val: loader: '$TMP/none-\*\.shard': no shard matches$" "$TMP/dv.err"):$(grep -c '^sa1b-train' "$TMP/dv.err")" \
        "3:1:1" "a --val that matches nothing: exit 3, one line (no collective timeout)"
else
    skip 5 "sa1b-synth or sa1b-shard not built"
fi

# --overwrite under mpirun where rank 1 cannot start (its optimizer does
# not fit --memory-limit): the job ends before rank 0 removes anything
ow="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 1 --synthetic-batch 5 --threads 1 -q"
# shellcheck disable=SC2086
mpi sa1b-train $ow --steps 4 --ckpt-every 2 --out "$TMP/ow" >/dev/null 2>&1 || exit 99
before=$(ls "$TMP/ow" | tr '\n' ' ')
# shellcheck disable=SC2086
mpirun --oversubscribe --bind-to none -np 1 sa1b-train $ow --steps 2 --overwrite --collective-timeout 30 --out "$TMP/ow" : \
    -np 1 sa1b-train $ow --steps 2 --overwrite --memory-limit 7M --collective-timeout 30 --out "$TMP/ow" \
    >/dev/null 2>"$TMP/ow.err"
is "$?:$(grep -c '^sa1b-train: out of memory for the optimizer' "$TMP/ow.err")" "3:1" \
    "--overwrite, rank 1 out of memory for its optimizer: exit 3, its line"
is "$(ls "$TMP/ow" | tr '\n' ' ')" "$before" "the earlier run is left as it was"
done_testing
