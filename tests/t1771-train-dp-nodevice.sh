#!/bin/sh
# t1771: a data-parallel job on the CUDA backend where there is no GPU (or
# no CUDA built): mpirun -np N sa1b-train --backend cuda ends at once, every
# rank with exit status 3, in one line from the trainer (the lowest rank
# that failed names itself; the others stay silent), with nothing written;
# a job where one rank alone fails ends too, with that rank's line, instead
# of leaving the other waiting.  On a machine with a CUDA device this is
# t1772-train-dp-cuda.sh's business: skipped here.
. "$top_srcdir/tests/test-lib.sh"
command -v mpirun >/dev/null || skip_all "no mpirun (Debian: openmpi-bin)"
ldd "$BUILD/trainer/sa1b-train" 2>/dev/null | grep -q libmpi || skip_all "sa1b-train built without MPI"
mpi_env

args="--config tiny --batch 2 --masks 4 --synthetic-batch 5 --steps 2 --threads 1 -q"
sa1b-train --backend cuda $args --out "$TMP/alone" >"$TMP/alone.log" 2>&1
grep -Eq "no CUDA device|not available in this build" "$TMP/alone.log" ||
    skip_all "sa1b-train --backend cuda does not fail for want of a device here: $(head -1 "$TMP/alone.log")"
why=$(sed -n 's/^sa1b-train: --backend cuda: //p' "$TMP/alone.log")

# lines of the trainer in a job's output (mpirun adds its own)
ours() { grep -c '^sa1b-train: ' "$1"; }
T=$BUILD/trainer/sa1b-train
for n in 1 2; do
    timeout -s KILL 120 mpirun --oversubscribe --bind-to none -np $n "$T" --backend cuda $args --out "$TMP/j$n" \
        >"$TMP/j$n.log" 2>&1
    is "$?" 3 "mpirun -np $n sa1b-train --backend cuda: exit status 3, not a hang"
    is "$(ours "$TMP/j$n.log")" 1 "-np $n: one line from the trainer"
    if [ $n -gt 1 ]; then want="^sa1b-train: rank 0 of $n: --backend cuda: "; else want="^sa1b-train: --backend cuda: "; fi
    grep_ok "$want" "$TMP/j$n.log" "-np $n: the line names the rank and the backend"
    grep -qF "$why" "$TMP/j$n.log"
    ok $? "-np $n: and says why (as one process does: $why)"
    test ! -e "$TMP/j$n"
    ok $? "-np $n: nothing written"
done

# rank 0 on the CPU, rank 1 on the missing device: rank 0 does not wait for
# a rank that cannot start (a short --collective-timeout would end it, with
# another line: the test sees the agreement, not the watchdog)
timeout -s KILL 120 mpirun --oversubscribe --bind-to none -np 1 "$T" --backend cpu $args --collective-timeout 100 \
    --out "$TMP/m" : -np 1 "$T" --backend cuda $args --collective-timeout 100 --out "$TMP/m" >"$TMP/m.log" 2>&1
is "$?" 3 "one rank without its device: the job ends (exit status 3)"
is "$(ours "$TMP/m.log")" 1 "in one line"
grep_ok "^sa1b-train: rank 1 of 2: --backend cuda: " "$TMP/m.log" "from the rank that failed"
done_testing
