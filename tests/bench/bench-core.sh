#!/bin/sh
# bench-core.sh [OLD_COMMIT] [WORKDIR] - the trainer's core against an older
# build of itself (default 848734e, the last main before issue 15's core),
# built beside this one from a git worktree:
#  1. fp32 on the CPU is bit-identical: the tensors (not the metadata) of
#     the tiny and small checkpoints and optimizer states after 50 steps,
#     with and without --checkpoint-every 1 --checkpoint-decoder (and the
#     same for each precision in PRECISIONS, default fp32: e.g.
#     PRECISIONS="fp32 bf16 fp16" against a commit with the same 16-bit
#     numerics);
#  2. speed, small config B=8, old and new alternately, RUNS runs each
#     (default 5) of STEPS steps (default 12; the median step time of each
#     run, steps 3 and later), fp32 and bf16: medians, spreads and ratios.
# Weights differ across CPUs (OpenBLAS picks its kernels per CPU): compare
# on one machine only.  Run from the build directory (or set top_builddir).
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$top_srcdir/tests/bench/bench-lib.sh"
old=${1:-848734e}
bench_workdir "${2:-}"
RUNS=${RUNS:-5}
STEPS=${STEPS:-12}
new_bin=$(cd "$top_builddir" && pwd)/trainer/sa1b-train
[ -x "$new_bin" ] || { echo "bench-core: build first ($new_bin missing)" >&2; exit 2; }

# the old build
if [ ! -x "$tmp/old/build/trainer/sa1b-train" ]; then
    rm -rf "$tmp/old"
    git -C "$top_srcdir" worktree add --detach "$tmp/old" "$old" >/dev/null 2>&1 ||
        { echo "bench-core: cannot check out $old" >&2; exit 2; }
    (cd "$tmp/old" && scripts/build build --with-cuda=no >/dev/null 2>&1) ||
        { echo "bench-core: the build of $old failed" >&2; exit 2; }
fi
old_bin=$tmp/old/build/trainer/sa1b-train

PRECISIONS=${PRECISIONS:-fp32}
echo "== 1. tensors after 50 steps ($PRECISIONS): $old vs this build"
fails=0
for prec in $PRECISIONS; do
for cfg in "--config tiny --batch 4 --masks 8" "--config small --batch 2 --masks 8"; do
    for ck in "" "--checkpoint-every 1 --checkpoint-decoder"; do
        args="$cfg $ck --precision $prec --synthetic-batch 3 --steps 50 --ckpt-every 50 --threads 2 -q"
        rm -rf "$tmp/o" "$tmp/n"
        "$old_bin" $args --out "$tmp/o" 2>/dev/null
        "$new_bin" $args --out "$tmp/n" 2>/dev/null
        for f in model-50.safetensors state-50.bin; do
            r=$(python3 "$top_srcdir/tests/bench/st_tensors.py" "$tmp/o/$f" "$tmp/n/$f")
            rc=$?
            [ $rc -eq 0 ] || fails=$((fails + 1))
            printf '%-5s %-40s %-45s %s\n' "$prec" "$cfg" "${ck:-(no checkpointing)} $f" "$r"
        done
    done
done
done
[ $fails -eq 0 ] && echo "all identical" || echo "$fails comparisons differ"
[ "${BENCH_CORE_SPEED:-1}" = 0 ] && exit $((fails > 0))

echo
echo "== 2. step time, small config B=8, $RUNS alternating runs of $STEPS steps"
# the median step_s of steps 3.. of one run's log
run_median() {
    rm -rf "$tmp/s"
    "$1" --config small --batch 8 --synthetic-batch 1 --steps "$STEPS" --log-every 1 --ckpt-every 100000 \
        --threads 2 -q $2 --out "$tmp/s" 2>/dev/null || { echo nan; return; }
    sed -n 's/.*"step": \([0-9]*\),.*"step_s": \([0-9.]*\).*/\1 \2/p' "$tmp/s/log.jsonl" |
        awk '$1 >= 3 {print $2}' | sort -n | awk '{a[NR] = $1} END {print NR ? a[int((NR + 1) / 2)] : "nan"}'
}
: > "$tmp/times"
for i in $(seq 1 "$RUNS"); do
    for prec in fp32 bf16; do
        echo "old $prec $(run_median "$old_bin" "--precision $prec")" >> "$tmp/times"
        echo "new $prec $(run_median "$new_bin" "--precision $prec")" >> "$tmp/times"
    done
done
awk '
    { t[$1 " " $2] = t[$1 " " $2] " " $3 }
    function stats(k,   n, a, i, j, x) {
        n = split(t[k], a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
        med[k] = a[int((n + 1) / 2)]; lo[k] = a[1]; hi[k] = a[n]
    }
    END {
        split("old fp32,new fp32,old bf16,new bf16", ks, ",")
        printf "%-10s %10s %10s %10s\n", "build", "median s", "min", "max"
        for (i = 1; i <= 4; i++) { stats(ks[i]); printf "%-10s %10.4f %10.4f %10.4f\n", ks[i], med[ks[i]], lo[ks[i]], hi[ks[i]] }
        printf "new/old fp32: %.3f (target <= 1.05)\n", med["new fp32"] / med["old fp32"]
        printf "new bf16/fp32: %.3f (target <= 1.25); old bf16/fp32: %.3f\n", med["new bf16"] / med["new fp32"], med["old bf16"] / med["old fp32"]
    }' "$tmp/times"
git -C "$top_srcdir" worktree prune 2>/dev/null
[ $fails -eq 0 ]
