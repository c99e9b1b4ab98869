#!/bin/sh
# bench-shard.sh - images/s of sa1b-shard on a synthetic SA-1B-size tar
# (2250x1500, 100 masks per image), --max-masks 64, for --image-size 1024 and
# 256, against (a) a Python pipeline doing what users do today
# (tests/bench/shard_baseline.py) and (b) the floor: TurboJPEG decode alone
# at the same DCT scale on the same threads; median of 3 runs of each, all
# in this run.  Usage: bench-shard.sh [IMAGES] [THREADS]
set -eu
: "${top_builddir:=.}" "${top_srcdir:=.}"
B=$(cd "$top_builddir" && pwd); S_=$(cd "$top_srcdir" && pwd)
N=${1:-24}; T=${2:-$(nproc)}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
PY=/usr/bin/python3
"$B/shard-tools/sa1b-synth" --quiet --images "$N" --seed 7 -o "$tmp/a.tar"
median() { sort -g | sed -n 2p; }
rate_shard() {
    "$B/shard-tools/sa1b-shard" -q -j "$T" --json-summary --image-size "$1" --max-masks 64 -o "$tmp/o.shard" "$tmp/a.tar" |
        sed 's/.*"images":\([0-9]*\).*"seconds":\([0-9.]*\).*/\1 \2/' | awk '{printf "%.3f\n", $1 / $2}'
}
printf '%-12s %10s %10s %12s %10s %12s %10s\n' "image-size" "sa1b-shard" "python" "vs python" "jpeg-only" "vs jpeg-only" "threads"
for S in 1024 256; do
    ours=$(for i in 1 2 3; do rate_shard "$S"; done | median)
    floor=$(for i in 1 2 3; do "$B/tests/bench/bench-jpeg-floor" "$tmp/a.tar" "$S" "$T"; done | median)
    if $PY -c 'import numpy, PIL' 2>/dev/null; then
        py=$(for i in 1 2 3; do $PY "$S_/tests/bench/shard_baseline.py" "$tmp/a.tar" "$tmp/py.bin" "$S" 64; done | median)
    else
        py=nan
    fi
    awk -v s="$S" -v o="$ours" -v p="$py" -v f="$floor" -v t="$T" 'BEGIN {
        printf "%-12s %10.1f %10.2f %11.1fx %10.1f %11.0f%% %10d\n", s, o, p, (p > 0 ? o / p : 0), f, 100 * o / f, t }'
done
echo "(images/s, median of 3; $N images of 2250x1500 with 100 masks; python is one process)"
