#!/bin/sh
# bench-dp.sh - issue 18's data-parallel figures on the CPU backend: images/s
# of one process x 2 threads (--batch 8) against 2 ranks x 1 thread under
# mpirun (--batch 4 each: the same global batch of 8), small configuration,
# synthetic batches, and the share of the step the ranks spend in their
# collectives (the log's sync_pct: the gradient sum, or with --zero 1 the
# reduce-scatter and the sum of the squares' parts, waits for the slower
# rank included; the weight gather of --zero 1 is not in it).  Each run
# reports the medians over its steps after the first two; the table gives
# the median of BENCH_DP_RUNS runs (3), the runs of the three cases
# alternating.  Then the collectives alone (bench-dist, where built): the
# all-reduce of --zero 0, and --zero 1's gather after an all-reduce (as
# before issue 18) or after a reduce-scatter (now).  BENCH_DP_STEPS (12);
# BENCH_DP_TRAIN: another sa1b-train to measure (a build to compare
# against); BENCH_DP_DIR keeps the files there.  Skipped without mpirun or
# an MPI build.
. "${top_srcdir:-.}/tests/bench/bench-lib.sh"
train=${BENCH_DP_TRAIN:-$(command -v sa1b-train)}
runs=${BENCH_DP_RUNS:-3}
steps=${BENCH_DP_STEPS:-12}
if ! command -v mpirun >/dev/null || ! ldd "$train" 2>/dev/null | grep -q libmpi; then
    echo "bench-dp: skipped (no mpirun, or $train built without MPI)"
    exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
bench_workdir "${BENCH_DP_DIR:-}"
args="--config small --masks 8 --points 1 --synthetic-batch 5 --steps $steps --log-every 1 -q --overwrite"

# the medians of field over the steps after the first two of log
med() {
    sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | tail -n +3 | sort -g |
        awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

echo "bench-dp: $train, load $(cut -d' ' -f1-3 /proc/loadavg), $runs runs of $steps steps"
for r in $(seq "$runs"); do
    "$train" $args --batch 8 --threads 2 --out "$tmp/one" 2>/dev/null || exit 1
    echo "$(med "$tmp/one/log.jsonl" images_per_s)" >> "$tmp/one.ips"
    for z in 0 1; do
        mpirun --oversubscribe --bind-to none -np 2 "$train" $args --batch 4 --threads 1 --zero $z \
            --out "$tmp/z$z" >/dev/null 2>&1 || exit 1
        echo "$(med "$tmp/z$z/log.jsonl" images_per_s)" >> "$tmp/z$z.ips"
        echo "$(med "$tmp/z$z/log.jsonl" sync_pct)" >> "$tmp/z$z.sync"
    done
done
printf '%-28s %-22s %s\n' "case" "images/s: median (runs)" "sync_pct: median (runs)"
printf '%-28s %-22s %s\n' "N=1 x 2 threads" "$(median < "$tmp/one.ips") ($(tr '\n' ' ' < "$tmp/one.ips"| sed 's/ $//'))" "-"
for z in 0 1; do
    printf '%-28s %-22s %s\n' "N=2 x 1 thread, --zero $z" \
        "$(median < "$tmp/z$z.ips") ($(tr '\n' ' ' < "$tmp/z$z.ips" | sed 's/ $//'))" \
        "$(median < "$tmp/z$z.sync")% ($(tr '\n' ' ' < "$tmp/z$z.sync" | sed 's/ $//'))"
done
echo "bench-dp: load after $(cut -d' ' -f1-3 /proc/loadavg)"
# the collectives alone, on the small configuration's gradient (bench-dist.c)
dist=$top_builddir/tests/bench/bench-dist
[ -x "$dist" ] && mpirun --oversubscribe --bind-to none -np 2 "$dist"
exit 0
