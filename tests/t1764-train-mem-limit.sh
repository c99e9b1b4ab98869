#!/bin/sh
# t1764: running out of memory is an error, never an abort or a hang.
# --memory-limit below the planner's peak stops the run in the middle of a
# step with exit 3 and one line naming the category and the planner's
# micro-batch, which then trains under the same limit; at the planner's
# peak reserved bytes exactly the run trains.  Under `ulimit -v` at limits
# from the planner's peak to twice it, every run ends within a minute with
# exit 0 or 3 (one line), never spinning in the BLAS.  A second SIGTERM
# ends a run at once.
. "$top_srcdir/tests/test-lib.sh"
tiny="--config tiny --batch 4 --masks 4 --points 2 --synthetic-batch 1 --precision bf16 --threads 2 -q"
peak=$(sa1b-train $tiny --plan | sed -n 's/^predicted: .*peak_reserved=\([0-9]*\).*/\1/p')
[ -n "$peak" ] && [ "$peak" -gt 0 ]
ok $? "the planner's peak reserved: $peak bytes"

run_status 3 "--memory-limit one byte below the peak: exit 3" \
    sa1b-train $tiny --steps 2 --out "$TMP/a" --memory-limit $((peak - 1))
is "$(wc -l < "$TMP/.err" | tr -d ' ')" 1 "one line on stderr"
grep_ok '^sa1b-train: out of memory: workspace of .* could not be allocated under --memory-limit; the planner.s largest micro-batch for .* is --batch [0-9]+' \
    "$TMP/.err" "it names the category (the step's workspace) and the planner's micro-batch"
b=$(sed -n 's/.* is --batch \([0-9]*\) .*/\1/p' "$TMP/.err")
run_ok "the suggested --batch ${b:-?} trains under the same limit" \
    sa1b-train $tiny --batch "${b:-0}" --steps 2 --out "$TMP/b" --memory-limit $((peak - 1))
run_ok "at the planner's peak exactly the run trains" \
    sa1b-train $tiny --steps 2 --out "$TMP/c" --memory-limit "$peak"
run_status 2 "--memory-limit takes a size" sa1b-train $tiny --steps 2 --out "$TMP/d" --memory-limit 12Q
run_status 2 "--memory-limit is not for --plan" sa1b-train $tiny --plan --memory-limit 1G

# ulimit -v: the small model at B=8 (OpenBLAS spins on a refused buffer:
# the run must refuse first).  AddressSanitizer maps terabytes of shadow.
if grep -q __asan_init "$BUILD/trainer/sa1b-train" 2>/dev/null || ! command -v timeout >/dev/null; then
    skip 6 "ulimit -v: not under AddressSanitizer"
else
    small="--config small --batch 8 --masks 16 --synthetic-batch 1 --threads 2 -q --steps 1"
    sp=$(sa1b-train $small --plan | sed -n 's/^predicted: .*peak_reserved=\([0-9]*\).*/\1/p')
    first=""
    for f in 100 125 150 175 200; do
        kb=$((sp / 1024 * f / 100))
        (ulimit -v $kb && exec timeout -s KILL 60 sa1b-train $small --out "$TMP/u$f") >"$TMP/u$f.out" 2>"$TMP/u$f.err"
        rc=$?
        [ -z "$first" ] && first=$rc
        lines=$(wc -l < "$TMP/u$f.err" | tr -d ' ')
        { [ $rc -eq 0 ] && [ "$lines" -eq 0 ]; } ||
            { [ $rc -eq 3 ] && [ "$lines" -eq 1 ] && grep -Eq 'ulimit -v|out of memory' "$TMP/u$f.err"; }
        ok $? "ulimit -v ${kb}K ($f% of the planner's peak): exit $rc within a minute, $lines line(s)"
        [ $rc -eq 3 ] && sed 's/^/# /' "$TMP/u$f.err"
    done
    is "$first" 3 "at the planner's peak the address space cannot hold the run: exit 3"
fi

# a second SIGTERM ends the run at once (the first waits for the step).
# Signals of one kind do not queue, so the second is sent 50 ms after the
# first; should the step end in between (a clean exit 130), try again.
rc=""
for try in 1 2 3; do
    rm -rf "$TMP/s"
    sa1b-train --config small --batch 8 --synthetic-batch 1 --threads 2 -q --steps 100000 --out "$TMP/s" 2>"$TMP/s.err" &
    pid=$!
    n=0
    while [ ! -s "$TMP/s/log.jsonl" ] && [ $n -lt 600 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; n=$((n + 1)); done
    kill -TERM $pid; sleep 0.05; kill -TERM $pid 2>/dev/null
    wait $pid
    rc=$?
    [ $rc -eq 130 ] || break
done
is "$rc" 143 "two SIGTERMs: killed by the second (exit 143; try $try)"
done_testing
