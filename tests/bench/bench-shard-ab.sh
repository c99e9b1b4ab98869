#!/bin/sh
# bench-shard-ab.sh OLD [RUNS] [IMAGES] [THREADS] - images/s of two
# sa1b-shard binaries, OLD (another build's shard-tools/sa1b-shard) and this
# build's, run alternately (old, new, old, new, ...) so that load from other
# processes hits both alike, from a path and from stdin, on a synthetic
# SA-1B-size tar (--image-size 1024 --max-masks 64).  Prints every run sorted
# and the median of each; a change costs nothing when the medians lie within
# each other's spread.  Not part of "make bench": it needs the other build.
set -eu
: "${top_builddir:=.}"
B=$(cd "$top_builddir" && pwd)
OLD=${1:?usage: bench-shard-ab.sh OLD-SA1B-SHARD [RUNS] [IMAGES] [THREADS]}
NEW=$B/shard-tools/sa1b-shard
RUNS=${2:-7}; N=${3:-100}; T=${4:-$(nproc)}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$B/shard-tools/sa1b-synth" --quiet --images "$N" --seed 7 -o "$tmp/a.tar"
rate() { sed 's/.*"images":\([0-9]*\).*"seconds":\([0-9.]*\).*/\1 \2/' | awk '{printf "%.1f\n", $1 / $2}'; }
for f in old.path new.path old.stdin new.stdin; do : >"$tmp/$f"; done
i=0
while [ $i -lt "$RUNS" ]; do
    for v in old new; do
        if [ $v = old ]; then bin=$OLD; else bin=$NEW; fi
        rm -f "$tmp/o.shard"
        "$bin" -q -j "$T" --json-summary --image-size 1024 --max-masks 64 -o "$tmp/o.shard" "$tmp/a.tar" | rate >>"$tmp/$v.path"
        rm -f "$tmp/o.shard"
        "$bin" -q -j "$T" --json-summary --image-size 1024 --max-masks 64 --name a -o "$tmp/o.shard" - <"$tmp/a.tar" |
            rate >>"$tmp/$v.stdin"
    done
    i=$((i + 1))
done
echo "bench-shard-ab: $RUNS runs each, $N images, $T threads, images/s (load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
for f in old.path new.path old.stdin new.stdin; do
    printf '%-10s median %7s   runs: %s\n' "$f" "$(sort -g "$tmp/$f" | sed -n "$(((RUNS + 1) / 2))p")" "$(sort -g "$tmp/$f" | tr '\n' ' ')"
done
