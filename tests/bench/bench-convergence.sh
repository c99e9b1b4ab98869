#!/bin/sh
# bench-convergence.sh - issue 7's "final mIoU within 2% of the baseline":
# fp32 AdamW against all the memory features together, trained to the end
# of a schedule with the learning recipe of sa1b-train(1) EXAMPLES (tiny
# configuration, the demo's learn shards: 2000 synthetic training images,
# S=128), over many seeds, each pair evaluated on 1000 held-out images.
# "all" is --precision bf16 --checkpoint-every 1 --checkpoint-decoder
# --optim adamw8bit with micro-batch 4 x --accum 2 (the effective batch
# stays 8), without --freeze (a frozen encoder would not be trained).
#
# The protocol takes the early empty-mask plateau out of the comparison.
# From scratch, when a run leaves that plateau (1000 to 6500 steps, chaotic
# in seed and configuration) decides much of its final mIoU, and pairs of
# 15000-step runs differed by -35% to +34%.  So one shared fp32 run (seed
# 1, BENCH_CONV_INIT_STEPS steps, warmup BENCH_CONV_INIT_WARMUP) is trained
# first, past the plateau, and every run of the table starts from its
# weights (sa1b-train --init: fresh optimizer, schedule, and the data order,
# flips and points of the run's own seed) for BENCH_CONV_STEPS more steps.
# A pair shares its seed, hence its data.  The runs still spread by a few
# percent (chaos: even a rounding difference grows), so the table gives
# the paired differences' mean and standard error; the target counts as
# resolved when that standard error is at most 1%.
#
# Takes about 75 minutes on 2 cores (two runs at a time, one thread each, 12
# seeds), so make bench runs it only with SA1B_BENCH_LONG=1.  Environment:
# BENCH_CONV_SEEDS ("1 2 ... 12"), BENCH_CONV_STEPS (6000),
# BENCH_CONV_WARMUP (500), BENCH_CONV_LR (1.5e-3), BENCH_CONV_INIT_STEPS
# (3000; 0 trains every run from scratch), BENCH_CONV_INIT_WARMUP (1000),
# BENCH_CONV_JOBS (2), BENCH_CONV_DIR (keep the files there; shards
# reused), BENCH_CONV_REUSE=1 (with BENCH_CONV_DIR: keep the runs already
# trained there with these settings, evaluate them again: a table over
# seeds trained in several sittings).
set -u
. "${top_srcdir:-.}/tests/bench/bench-lib.sh"
if [ "${SA1B_BENCH_LONG:-0}" != 1 ]; then
    echo "bench-convergence: skipped (about 75 minutes on 2 cores; SA1B_BENCH_LONG=1 runs it)"
    exit 0
fi
SEEDS=${BENCH_CONV_SEEDS:-1 2 3 4 5 6 7 8 9 10 11 12}
STEPS=${BENCH_CONV_STEPS:-6000}
WARMUP=${BENCH_CONV_WARMUP:-500}
LR=${BENCH_CONV_LR:-1.5e-3}
INIT_STEPS=${BENCH_CONV_INIT_STEPS:-3000}
INIT_WARMUP=${BENCH_CONV_INIT_WARMUP:-1000}
JOBS=${BENCH_CONV_JOBS:-2}
REUSE=${BENCH_CONV_REUSE:-0}
bench_workdir "${BENCH_CONV_DIR:-}"
[ -n "${BENCH_CONV_DIR:-}" ] || REUSE=0
if ! [ -s "$tmp/val1k.shard" ]; then
    sa1b-synth --quiet -n 2000 -W 480 -H 320 -m 5 -s 1 --nesting flat -o "$tmp/learn-train.tar" &&
        sa1b-synth --quiet -n 1000 -W 480 -H 320 -m 5 -s 3 --first-id 200000 --nesting flat -o "$tmp/val1k.tar" &&
        sa1b-shard -q --image-size 128 --min-area 5000 -o "$tmp/learn-train.shard" "$tmp/learn-train.tar" &&
        sa1b-shard -q --image-size 128 --min-area 5000 -o "$tmp/val1k.shard" "$tmp/val1k.tar" ||
        { echo "bench-convergence: cannot make the shards" >&2; exit 1; }
fi

# one run: train (unless reused), then evaluate the last checkpoint; the
# mIoU goes to NAME.miou.  A reused run must have been made with the same
# command line (kept in NAME.cmd), and from the same warm start.
run() { # NAME SEED KIND STEPS WARMUP INIT THREADS
    name=$1 threads=$7
    case $3 in
    fp32) extra="--batch 8" ;;
    all) extra="--batch 4 --accum 2 --precision bf16 --checkpoint-every 1 --checkpoint-decoder --optim adamw8bit" ;;
    esac
    set -- "$1" --config tiny --data "$tmp/learn-train.shard" --out "$tmp/$1" --steps "$4" $extra --masks 5 \
        --points 1 --lr "$LR" --warmup "$5" --adam-eps 1e-12 --seed "$2" ${6:+--init "$6"} --threads "$threads" \
        --log-every 500
    shift
    key="$*${init:+ from: $(cat "$tmp/warm.cmd")}" # a run from the warm start also keys on how that was made
    if [ "$REUSE" = 1 ] && [ "$(cat "$tmp/$name.cmd" 2>/dev/null)" = "$key" ] &&
        [ -s "$tmp/$name/model-$(cat "$tmp/$name/latest" 2>/dev/null).safetensors" ]; then
        :
    else
        rm -rf "${tmp:?}/$name" "$tmp/$name.cmd"
        sa1b-train "$@" >"$tmp/$name.log" 2>&1 || { echo "bench-convergence: $name failed" >&2; return 1; }
        echo "$key" >"$tmp/$name.cmd"
    fi
    sa1b-train --eval-only "$tmp/$name/model-$(cat "$tmp/$name/latest").safetensors" --val "$tmp/val1k.shard" \
        --batch 8 --masks 32 --threads "$threads" --out "$tmp/$name-eval" >"$tmp/$name.eval" 2>&1 ||
        { echo "bench-convergence: eval of $name failed" >&2; return 1; }
    sed -n 's/.*"miou": \([0-9.]*\).*/\1/p' "$tmp/$name.eval" | tail -1 >"$tmp/$name.miou"
}

init=""
rm -f "$tmp"/*.miou
if [ "$INIT_STEPS" -gt 0 ]; then
    run warm 1 fp32 "$INIT_STEPS" "$INIT_WARMUP" "" 2 || exit 1
    init="$tmp/warm/model-$INIT_STEPS.safetensors"
    echo "bench-convergence: warm start: fp32 seed 1, $INIT_STEPS steps (warmup $INIT_WARMUP), validation mIoU $(cat "$tmp/warm.miou")"
fi

# JOBS lanes (one thread each), the long runs first, each lane running its share in turn
jobs=""
for s in $SEEDS; do jobs="$jobs all$s:$s:all"; done
for s in $SEEDS; do jobs="$jobs fp32-$s:$s:fp32"; done
lane=0
while [ $lane -lt "$JOBS" ]; do
    (
        i=0
        for j in $jobs; do
            if [ $((i % JOBS)) -eq $lane ]; then
                IFS=: read -r name seed kind <<EOF
$j
EOF
                run "$name" "$seed" "$kind" "$STEPS" "$WARMUP" "$init" 1
            fi
            i=$((i + 1))
        done
    ) &
    lane=$((lane + 1))
done
wait

echo "bench-convergence: tiny recipe, lr $LR, $STEPS steps (warmup $WARMUP)${init:+ from the warm start}," \
    "validation mIoU on 1000 held-out images"
printf '%-6s %10s %10s %10s\n' seed fp32 all "all/fp32"
for s in $SEEDS; do
    f=$(cat "$tmp/fp32-$s.miou" 2>/dev/null || echo nan)
    a=$(cat "$tmp/all$s.miou" 2>/dev/null || echo nan)
    echo "$s $f $a"
done | awk '!($2 + 0 > 0 && $3 + 0 > 0) { printf "%-6s %10s %10s %10s\n", $1, $2, $3, "-"; bad = 1; next }
    { d = 100 * ($3 - $2) / $2; printf "%-6s %10.4f %10.4f %+9.1f%%\n", $1, $2, $3, d
      f += $2; a += $3; s += d; ss += d * d; n++ }
    END { if (bad) print "target all: not measured (a run has no mIoU)"
          if (n && !bad) { printf "%-6s %10.4f %10.4f %+9.1f%%\n", "mean", f / n, a / n, 100 * (a - f) / f
          m = s / n; se = n > 1 ? sqrt((ss - n * m * m) / (n - 1) / n) : 0
          printf "paired difference: mean %+.2f%%, standard error %.2f%% over %d seeds\n", m, se, n
          ok = (m <= 2 && m >= -2) ? "ok" : "MISSED"
          why = se > 1 ? " (not resolved: the standard error is over 1%)" : ""
          printf "target all: paired mean mIoU within 2%% of fp32: %s%s\n", ok, why } }'
