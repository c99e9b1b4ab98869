#!/bin/sh
# t1772: data-parallel training on the CUDA backend through NCCL, with one
# rank (N=1: NCCL refuses two ranks on one GPU).  mpirun -np 1 sa1b-train
# --backend cuda takes the data-parallel path (the gradient and loss sums,
# and with --zero 1 the gradient reduce-scatter, the sum of the squares and
# the weight gather, over an NCCL communicator
# bootstrapped over MPI, each a copy with one rank): with accumulation its
# losses and checkpoint tensors are bit for bit those of the same run
# without mpirun (both sum the pairs' losses before one scaling), and
# --zero 1 gives the weights of --zero 0; without accumulation (the mean
# loss's gradient against the sum's, scaled after) the losses agree to
# 1e-3.  Two ranks on a machine of one GPU end in one line.  Skips (77),
# saying why, without mpirun, MPI, NCCL or a device.
. "$top_srcdir/tests/test-lib.sh"
PY=$(command -v python3 || echo /usr/bin/python3) # (the standard library only)
command -v mpirun >/dev/null ||
    skip_all "no mpirun: the NCCL path is bootstrapped over MPI (Debian: openmpi-bin and libopenmpi-dev, before configure)"
T=$BUILD/trainer/sa1b-train
ldd "$T" 2>/dev/null | grep -q libmpi || skip_all "sa1b-train built without MPI (Debian: libopenmpi-dev, then configure)"
grep -q "libnccl.so.2" "$T" || skip_all "sa1b-train built without NCCL (configure found no nccl.h)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none

args="--backend cuda --config tiny --masks 4 --points 2 --synthetic-batch 7 --threads 1 -q --steps 4 --log-every 1 --ckpt-every 4"
sa1b-train $args --batch 2 --accum 2 --out "$TMP/a" >"$TMP/a.log" 2>&1 || {
    grep -q "no CUDA device" "$TMP/a.log" && skip_all "no CUDA device: $(head -1 "$TMP/a.log")"
    sed 's/^/# /' "$TMP/a.log"
    ok 1 "sa1b-train --backend cuda (one process)"
    done_testing
}
mpi() { timeout -s KILL 300 mpirun --bind-to none -np 1 "$@"; }

# the run with mpirun: the sums' fields in the log say that the
# data-parallel path ran (one process alone has none)
mpi "$T" $args --batch 2 --accum 2 --out "$TMP/b" >"$TMP/b.log" 2>&1
ok $? "mpirun -np 1 sa1b-train --backend cuda --accum 2"
sed 's/^/# /' "$TMP/b.log" | head -20
grep_ok '"ranks": 1, "sync_pct"' "$TMP/b/log.jsonl" "it sums over the ranks (NCCL)"
losses() { sed 's/.*"loss": \([^,]*\),.*/\1/' "$1/log.jsonl" | tr '\n' ' '; }
is "$(losses "$TMP/b")" "$(losses "$TMP/a")" "the losses of 4 steps, bit for bit those of the run without mpirun"
for f in model-4.safetensors state-4.bin; do
    r=$("$PY" "$SRC/tests/bench/st_tensors.py" "$TMP/a/$f" "$TMP/b/$f")
    ok $? "$f: the tensors of the run without mpirun ($r)"
done

# --zero 1 with one rank: its part is every parameter, reduce-scattered and
# gathered (copies)
mpi "$T" $args --batch 2 --accum 2 --zero 1 --out "$TMP/z" >"$TMP/z.log" 2>&1
ok $? "mpirun -np 1 sa1b-train --backend cuda --zero 1"
r=$("$PY" "$SRC/tests/bench/st_tensors.py" "$TMP/b/model-4.safetensors" "$TMP/z/model-4.safetensors")
ok $? "--zero 1: the weights of --zero 0 ($r)"
is "$(losses "$TMP/z")" "$(losses "$TMP/b")" "--zero 1: the same losses"

# without accumulation: the mean loss's gradient (one process) against the
# sum's scaled after the sum (the data-parallel path)
sa1b-train $args --batch 4 --out "$TMP/c" >"$TMP/c.log" 2>&1
ok $? "sa1b-train --backend cuda --batch 4"
mpi "$T" $args --batch 4 --out "$TMP/d" >"$TMP/d.log" 2>&1
ok $? "mpirun -np 1 sa1b-train --backend cuda --batch 4"
"$PY" "$SRC/tests/losses_agree.py" "$TMP/c/log.jsonl" "$TMP/d/log.jsonl" 4 1e-3
ok $? "--batch 4: the losses of 4 steps agree to 1e-3"

# two ranks on a machine of one GPU: rank 1 has no device of its own (NCCL
# refuses two ranks on one GPU): the job ends in rank 1's line.  Without
# CUDA_VISIBLE_DEVICES, which a container may set to 0 for the whole job:
# then each rank takes the one device it sees (as a launcher's binding of a
# GPU per rank sets it) and NCCL refuses the pair in other words
ndev=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$ndev" = 1 ]; then
    timeout -s KILL 300 mpirun --oversubscribe --bind-to none -np 2 env -u CUDA_VISIBLE_DEVICES "$T" $args \
        --batch 2 --out "$TMP/two" >"$TMP/two.log" 2>&1
    is "$?" 3 "two ranks on one GPU: the job ends (exit status 3)"
    is "$(grep -c '^sa1b-train: ' "$TMP/two.log")" 1 "in one line"
    grep_ok "^sa1b-train: rank 1 of 2: --backend cuda: no CUDA device 1: this machine has 1" "$TMP/two.log" \
        "from rank 1, naming the device it lacks"
else
    skip 3 "two ranks on one GPU: this machine has ${ndev:-no} GPUs by nvidia-smi"
fi
done_testing
