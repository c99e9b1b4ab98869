#!/bin/sh
# bench-convergence.sh - issue 7's "final mIoU within 2% of the baseline",
# measured at convergence: the learning recipe of sa1b-train(1) EXAMPLES
# (tiny configuration, the demo's learn shards: 2000 synthetic training
# images, 100 held-out ones, S=128) trained to the end, fp32 AdamW against
# all the memory features together, over several seeds, then evaluated on
# the held-out shard.  "all" is --precision bf16 --checkpoint-every 1
# --checkpoint-decoder --optim adamw8bit with micro-batch 4 x --accum 2 (the
# effective batch stays 8), without --freeze (a frozen, randomly initialised
# encoder is not a training from scratch).  The 2500-step mIoU column of
# bench-memory.sh cannot resolve 2%: at 2500 steps the runs are still on
# their way and a seed's run-to-run spread is larger than that.  So is the
# spread between seeds at 15000 steps (when a run leaves the early
# empty-mask plateau decides much of its final mIoU): the table gives the
# paired differences' mean and standard error, to be read against 2%.
#
# Takes about an hour on 2 cores (two runs at a time, one thread each), so
# make bench runs it only with SA1B_BENCH_LONG=1.  Environment:
# BENCH_CONV_STEPS (15000), BENCH_CONV_WARMUP (unset: the recipe's
# default warmup, min(100, steps/10)), BENCH_CONV_SEEDS
# ("1 2 3"), BENCH_CONV_JOBS (2), BENCH_CONV_DIR (keep files; shards reused).
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
if [ "${SA1B_BENCH_LONG:-0}" != 1 ]; then
    echo "bench-convergence: skipped (about an hour on 2 cores; SA1B_BENCH_LONG=1 runs it)"
    exit 0
fi
PATH="$top_builddir/trainer:$top_builddir/shard-tools:$PATH"
STEPS=${BENCH_CONV_STEPS:-15000}
WARMUP=${BENCH_CONV_WARMUP:-}
SEEDS=${BENCH_CONV_SEEDS:-1 2 3}
JOBS=${BENCH_CONV_JOBS:-2}
if [ -n "${BENCH_CONV_DIR:-}" ]; then
    tmp=$BENCH_CONV_DIR
    mkdir -p "$tmp"
else
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
fi
if ! [ -s "$tmp/learn-val.shard" ]; then
    sa1b-synth --quiet -n 2000 -W 480 -H 320 -m 5 -s 1 --nesting flat -o "$tmp/learn-train.tar" &&
        sa1b-synth --quiet -n 100 -W 480 -H 320 -m 5 -s 2 --first-id 100000 --nesting flat -o "$tmp/learn-val.tar" &&
        sa1b-shard -q --image-size 128 --min-area 5000 -o "$tmp/learn-train.shard" "$tmp/learn-train.tar" &&
        sa1b-shard -q --image-size 128 --min-area 5000 -o "$tmp/learn-val.shard" "$tmp/learn-val.tar" ||
        { echo "bench-convergence: cannot make the shards" >&2; exit 1; }
fi

# one run: train, then evaluate the last checkpoint; the mIoU goes to NAME.miou
run() { # NAME SEED KIND
    case $3 in
    fp32) extra="--batch 8" ;;
    all) extra="--batch 4 --accum 2 --precision bf16 --checkpoint-every 1 --checkpoint-decoder --optim adamw8bit" ;;
    esac
    rm -rf "$tmp/$1"
    # shellcheck disable=SC2086
    sa1b-train --config tiny --data "$tmp/learn-train.shard" --out "$tmp/$1" --steps "$STEPS" $extra \
        --masks 5 --points 1 --lr 1.5e-3 ${WARMUP:+--warmup "$WARMUP"} --adam-eps 1e-12 --seed "$2" --threads 1 \
        --log-every 500 >"$tmp/$1.log" 2>&1 || { echo "bench-convergence: $1 failed" >&2; return 1; }
    sa1b-train --eval-only "$tmp/$1/model-$(cat "$tmp/$1/latest").safetensors" --val "$tmp/learn-val.shard" \
        --batch 8 --masks 32 --out "$tmp/$1-eval" >"$tmp/$1.eval" 2>&1 || { echo "bench-convergence: eval of $1 failed" >&2; return 1; }
    sed -n 's/.*"miou": \([0-9.]*\).*/\1/p' "$tmp/$1.eval" | tail -1 >"$tmp/$1.miou"
}

# JOBS runs at a time (one thread each)
jobs=""
for s in $SEEDS; do jobs="$jobs all$s:$s:all fp32-$s:$s:fp32"; done
set -- $jobs
while [ $# -gt 0 ]; do
    n=0
    while [ $# -gt 0 ] && [ $n -lt "$JOBS" ]; do
        IFS=: read -r name seed kind <<EOF
$1
EOF
        run "$name" "$seed" "$kind" &
        shift
        n=$((n + 1))
    done
    wait
done

echo "bench-convergence: tiny recipe, $STEPS steps (warmup ${WARMUP:-default}), validation mIoU on 100 held-out images"
printf '%-6s %10s %10s %10s\n' seed fp32 all "all/fp32"
for s in $SEEDS; do
    f=$(cat "$tmp/fp32-$s.miou" 2>/dev/null || echo nan)
    a=$(cat "$tmp/all$s.miou" 2>/dev/null || echo nan)
    echo "$s $f $a"
done | awk '$2 + 0 <= 0 { printf "%-6s %10.4f %10.4f %10s\n", $1, $2, $3, "-"; bad = 1; next }
    { d = 100 * ($3 - $2) / $2; printf "%-6s %10.4f %10.4f %+9.1f%%\n", $1, $2, $3, d
      f += $2; a += $3; s += d; ss += d * d; n++ }
    END { if (bad) print "target all: not measured (an fp32 run has no mIoU)"
          if (n && !bad) { printf "%-6s %10.4f %10.4f %+9.1f%%\n", "mean", f / n, a / n, 100 * (a - f) / f
          m = s / n; se = n > 1 ? sqrt((ss - n * m * m) / (n - 1) / n) : 0
          printf "paired difference: mean %+.1f%%, standard error %.1f%% over %d seeds\n", m, se, n
          d = 100 * (a - f) / f; if (d < 0) d = -d
          ok = d <= 2 ? "ok" : "MISSED"
          why = se > 2 ? " (not resolved: the standard error is over 2%)" : ""
          printf "target all: mean mIoU within 2%% of fp32: %s%s\n", ok, why } }'
