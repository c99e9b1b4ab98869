#!/bin/sh
# bench-shard-ab.sh OLD [RUNS] [IMAGES] [THREADS] [SIZE] - images/s and CPU
# ms per image of two sa1b-shard binaries, OLD (another build's
# shard-tools/sa1b-shard) and this build's, run alternately (old, new, old,
# new, ...) so that load from other processes hits both alike, from a path
# and from stdin, on the input of bench-shard.sh (SA-1B-size crops of real
# photographs where plasma-workspace-wallpapers and python3-pil are there,
# bench-lib.sh), --image-size SIZE (1024) --max-masks 64.  Every new shard
# is compared with the old one of the same run (cmp): a speed-up must not
# change a byte.  Prints every run sorted and the median of each; a change
# costs nothing when the medians lie within each other's spread.  Not part
# of "make bench": it needs the other build.
set -eu
: "${top_builddir:=.}" "${top_srcdir:=.}"
. "$top_srcdir/tests/bench/bench-lib.sh"
bench_workdir "${BENCH_SHARD_DIR:-}"
OLD=${1:?usage: bench-shard-ab.sh OLD-SA1B-SHARD [RUNS] [IMAGES] [THREADS] [SIZE]}
NEW=$top_builddir/shard-tools/sa1b-shard
RUNS=${2:-7}; N=${3:-100}; T=${4:-$(nproc)}; S=${5:-1024}
TIME=/usr/bin/time
[ -x "$TIME" ] || TIME=""
bench_photo_tar "$N" "$tmp/a.tar"
# one run: "images/s CPU-ms-per-image" to stdout, the shard to $2
run() { # BIN OUT [-]
    bin=$1 out=$2
    rm -f "$out"
    if [ "${3:-}" = - ]; then set -- --name a -o "$out" -; else set -- -o "$out" "$tmp/a.tar"; fi
    if [ -n "$TIME" ]; then
        "$TIME" -f "%U %S" -o "$tmp/time" "$bin" -q -j "$T" --json-summary --image-size "$S" \
            --max-masks 64 "$@" <"$tmp/a.tar" >"$tmp/sum"
    else
        "$bin" -q -j "$T" --json-summary --image-size "$S" --max-masks 64 "$@" <"$tmp/a.tar" >"$tmp/sum"
        echo "nan nan" >"$tmp/time"
    fi
    sed 's/.*"images":\([0-9]*\).*"seconds":\([0-9.]*\).*/\1 \2/' "$tmp/sum" |
        awk -v t="$(cat "$tmp/time")" '{ split(t, c, " "); printf "%.1f %.2f\n", $1 / $2, (c[1] + c[2]) * 1000 / $1 }'
}
for f in old.path new.path old.stdin new.stdin; do : >"$tmp/$f"; done
differ=0
i=0
while [ $i -lt "$RUNS" ]; do
    for how in path stdin; do
        arg=""
        [ $how = stdin ] && arg=-
        run "$OLD" "$tmp/old.shard" $arg >>"$tmp/old.$how"
        run "$NEW" "$tmp/new.shard" $arg >>"$tmp/new.$how"
        cmp -s "$tmp/old.shard" "$tmp/new.shard" || differ=$((differ + 1))
    done
    i=$((i + 1))
done
echo "bench-shard-ab: $RUNS runs each, --image-size $S, $T threads (load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
echo "input: $bench_input"
for f in old.path new.path old.stdin new.stdin; do
    printf '%-10s images/s median %7s   runs: %s\n' "$f" "$(cut -d' ' -f1 "$tmp/$f" | sort -g | sed -n "$(((RUNS + 1) / 2))p")" \
        "$(cut -d' ' -f1 "$tmp/$f" | sort -g | tr '\n' ' ')"
    printf '%-10s cpu ms/img median %7s   runs: %s\n' "" "$(cut -d' ' -f2 "$tmp/$f" | sort -g | sed -n "$(((RUNS + 1) / 2))p")" \
        "$(cut -d' ' -f2 "$tmp/$f" | sort -g | tr '\n' ' ')"
done
echo "shards: $((2 * RUNS)) pairs compared, $differ differ"
[ "$differ" = 0 ]
