#!/bin/sh
# bench-rle-shards.sh - what run-length masks (--mask-format rle, format
# version 2) save and cost, on SA-1B-size samples: real photographs
# (Debian's plasma-workspace-wallpapers, the photographs among them, cropped
# to 2250x1500 by tests/bench/photo_tar.py; sa1b-synth's own pictures when
# the package or python3-pil is missing) with sa1b-synth's annotations
# (100 masks per image), sharded at the defaults: S=1024, R=256, every mask.
#
#  1. bytes per image by part (image payload, masks, the rest) for
#     raw/jpeg (q90) x packed/rle, and jpeg with --mask-size source, and the
#     whole of SA-1B at that rate (11,186,000 images: 1000 tars of ~11,186);
#  2. loader images/s and CPU per image (sa1b-loadbench, 64 masks per image)
#     from rle shards against packed ones, jpeg and raw, and from a
#     --mask-size source shard resampled to 256 against packed, runs
#     alternating, median of 7;
#  3. sa1b-shard images/s and CPU per image writing rle against packed,
#     alternating, median of 5;
#  4. the JPEG Huffman tables, optimized (the default) against standard
#     (--jpeg-huffman standard), jpeg + rle: image bytes per image, what the
#     second pass costs sa1b-shard (median of 5) and what the loader's
#     decode costs (median of 7), runs alternating.
# Usage: bench-rle-shards.sh [IMAGES] [THREADS]   (BENCH_RLE_DIR=DIR keeps the files)
set -eu
: "${top_builddir:=.}" "${top_srcdir:=.}"
. "$top_srcdir/tests/bench/bench-lib.sh"
bench_workdir "${BENCH_RLE_DIR:-}"
N=${1:-100}; T=${2:-$(nproc)}
SA1B_IMAGES=11186000
PY=/usr/bin/python3
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

echo "bench-rle-shards: load average before: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
bench_photo_tar "$N" "$tmp/a.tar"
echo "input: $bench_input"

# Wall time on a shared 2-core machine swings with its load (and a shard's
# fsync with the disk's), so every run also reports its CPU time (user +
# system, /usr/bin/time when present): CPU ms per image is the steadier
# figure of what a format costs.
TIME=/usr/bin/time
[ -x "$TIME" ] || TIME=""
timed() { # OUT CMD...: runs CMD, stdout to OUT.txt, "wall user sys" to OUT.time
    out=$1; shift
    if [ -n "$TIME" ]; then "$TIME" -f "%e %U %S" -o "$out.time" "$@" >"$out.txt"
    else "$@" >"$out.txt"; echo "nan nan nan" >"$out.time"; fi
}
cpu_ms() { awk -v n="$1" '{ printf "%.3f\n", ($2 + $3) * 1000 / n }' "$2.time"; }
shard() { # FORMAT MASKS OUT [OPTION...]: images/s to stdout, CPU ms per image to $tmp/cpu
    fmt=$1 masks=$2 out=$3
    shift 3
    rm -f "$out"
    if [ "$masks" = source ]; then m="--mask-size source"; else m="--mask-size 256 --mask-format $masks"; fi
    # shellcheck disable=SC2086
    timed "$tmp/run" sa1b-shard -q -j "$T" --json-summary --image-size 1024 $m \
        --image-format "$fmt" "$@" -o "$out" "$tmp/a.tar"
    cpu_ms "$N" "$tmp/run" >"$tmp/cpu"
    sed 's/.*"images":\([0-9]*\).*"seconds":\([0-9.]*\).*/\1 \2/' "$tmp/run.txt" |
        awk '{printf "%.3f\n", $1 / $2}'
}
row() { # NAME: the medians of $tmp/lp, lr (images/s), cp, cr (CPU ms), B against A
    awk -v f="$1" -v p="$(median <"$tmp/lp")" -v r="$(median <"$tmp/lr")" -v cp="$(median <"$tmp/cp")" \
        -v cr="$(median <"$tmp/cr")" 'BEGIN { printf "%-8s %10.1f %10.1f %7.2fx %10.2f %10.2f %7.2fx\n",
        f, p, r, r / p, cp, cr, cr / cp }'
}
header() { # A B: the names of the two columns compared
    printf '%-8s %10s %10s %8s %10s %10s %8s\n' "images" "$1/s" "$2/s" "ratio" "$1 ms" "$2 ms" "ratio"
}
loader_ab() { # NAME A B: sa1b-loadbench on shards A and B alternating, 7 runs each; a row
    for x in lp lr cp cr; do : >"$tmp/$x"; done
    for i in 1 2 3 4 5 6 7; do
        for x in p r; do
            [ $x = p ] && f=$2 || f=$3
            timed "$tmp/run" sa1b-loadbench -e 3 -b 8 -m 64 -t "$T" --mask-size 256 "$f"
            sed -n 's/.*images\/s[= ]\([0-9.]*\).*/\1/p' "$tmp/run.txt" >>"$tmp/l$x"
            cpu_ms $((3 * N)) "$tmp/run" >>"$tmp/c$x"
        done
    done
    row "$1"
}
shard_ab() { # NAME FORMAT MASKS_A MASKS_B 'OPTIONS_A' 'OPTIONS_B': sa1b-shard alternating, 5 runs each
    for x in lp lr cp cr; do : >"$tmp/$x"; done
    for i in 1 2 3 4 5; do
        # shellcheck disable=SC2086
        shard "$2" "$3" "$tmp/o.shard" $5 >>"$tmp/lp"
        cat "$tmp/cpu" >>"$tmp/cp"
        # shellcheck disable=SC2086
        shard "$2" "$4" "$tmp/o.shard" $6 >>"$tmp/lr"
        cat "$tmp/cpu" >>"$tmp/cr"
    done
    row "$1"
}
image_kb() { # SHARD: image payload bytes per image, KB
    sa1b-inspect "$1" | awk '/"type": "image"/ { n++; match($0, /"image_bytes": [0-9]+/)
        ib += substr($0, RSTART + 15, RLENGTH - 15) } END { printf "%.1f", ib / n / 1000 }'
}

echo
echo "1. bytes per image at S=1024, R=256, every mask (whole SA-1B = $SA1B_IMAGES images)"
printf '%-22s %10s %10s %10s %10s %12s\n' "format" "total KB" "image KB" "masks KB" "other KB" "all SA-1B"
src=$(wc -c <"$tmp/a.tar")
awk -v b="$src" -v n="$N" -v all="$SA1B_IMAGES" 'BEGIN {
    printf "%-22s %10.1f %10s %10s %10s %9.2f TB\n", "source tar", b / n / 1000, "-", "-", "-", b / n * all / 1e12 }'
for fmt in raw jpeg; do
    for masks in packed rle $([ $fmt = jpeg ] && echo source); do
        shard "$fmt" "$masks" "$tmp/$fmt-$masks.shard" >/dev/null
        sa1b-inspect "$tmp/$fmt-$masks.shard" | awk -v name="$fmt, $masks" -v all="$SA1B_IMAGES" '
            /"type": "shard"/ { match($0, /"file_size": [0-9]+/); fs = substr($0, RSTART + 13, RLENGTH - 13) }
            /"type": "image"/ { n++
                match($0, /"image_bytes": [0-9]+/); ib += substr($0, RSTART + 15, RLENGTH - 15)
                match($0, /"masks_bytes": [0-9]+/); mb += substr($0, RSTART + 15, RLENGTH - 15) }
            END { printf "%-22s %10.1f %10.1f %10.1f %10.1f %9.2f TB\n", name, fs / n / 1000, ib / n / 1000,
                         mb / n / 1000, (fs - ib - mb) / n / 1000, fs / n * all / 1e12 }'
    done
done
echo "(KB = 1000 bytes; 'other' = header, provenance, names, index and mask tables, padding)"
real=$(ls "$top_srcdir"/../shared/data/sa1b-real/sa_*.json 2>/dev/null | head -1)
if [ -n "$real" ] && [ -n "$photos" ] && $PY -c 'import PIL' 2>/dev/null; then
    # the synthetic shapes' edges are more ragged than SA-1B's: the masks of
    # a real annotation file, as runs, per mask and for the 100 of an image
    $PY "$top_srcdir/tests/bench/photo_tar.py" --annotation "$real" "$tmp/real.tar" "$(echo $photos | cut -d" " -f1)"
    sa1b-shard -q --image-size 1024 --mask-size 256 --image-format jpeg --mask-format rle \
        -o "$tmp/real.shard" "$tmp/real.tar"
    sa1b-inspect "$tmp/real.shard" | awk -v f="$(basename "$real")" -v all="$SA1B_IMAGES" -v row="$(
        sa1b-inspect "$tmp/jpeg-rle.shard" | awk '/"type": "shard"/ { match($0, /"file_size": [0-9]+/)
            fs = substr($0, RSTART + 13, RLENGTH - 13) } /"type": "image"/ { n++
            match($0, /"masks_bytes": [0-9]+/); mb += substr($0, RSTART + 15, RLENGTH - 15) }
            END { print (fs - mb) / n }')" '
        /"type": "image"/ { n++; match($0, /"masks_bytes": [0-9]+/); mb += substr($0, RSTART + 15, RLENGTH - 15)
            match($0, /"masks": [0-9]+/); nm += substr($0, RSTART + 9, RLENGTH - 9) }
        END { per = mb / nm
            printf "real SA-1B masks (%s, %d masks): %.1f bytes per mask as runs; with 100 such masks\n", f, nm, per
            printf "%-22s %10.1f %10s %10.1f %10s %9.2f TB\n", "jpeg, rle (real masks)", (row + 100 * per) / 1000,
                   "as above", 100 * per / 1000, "", (row + 100 * per) * all / 1e12 }'
    sa1b-shard -q --image-size 1024 --mask-size source --image-format jpeg -o "$tmp/real-src.shard" \
        "$tmp/real.tar"
    sa1b-inspect --summary "$tmp/real-src.shard" | sed -n 's/^format .*(\(.*\) bytes each.*/\1/p' |
        awk '{ printf "the same masks at the source size (--mask-size source): %.1f bytes per mask\n", $1 }'
fi

echo
echo "2. loader: images/s (wall) and CPU ms per image, 64 masks per image, $T threads"
echo "   (median of 7 alternating runs of 3 epochs)"
echo "   (the last row: rle = the source-size masks of --mask-size source, resampled to 256)"
header packed rle
for case in jpeg:rle raw:rle jpeg:source; do
    fmt=${case%:*} other=${case#*:}
    loader_ab "$fmt$([ "$other" = source ] && echo " src")" "$tmp/$fmt-packed.shard" "$tmp/$fmt-$other.shard"
done

echo
echo "3. sa1b-shard: images/s (wall) and CPU ms per image, $T threads (median of 5 alternating runs)"
header packed rle
for fmt in jpeg raw; do
    shard_ab "$fmt" "$fmt" packed rle "" ""
done

echo
echo "4. JPEG Huffman tables: optimized (the default) against standard (--jpeg-huffman standard),"
echo "   jpeg + rle, $T threads, runs alternating"
shard jpeg rle "$tmp/jpeg-rle-std.shard" --jpeg-huffman standard >/dev/null
echo "image bytes per image: standard $(image_kb "$tmp/jpeg-rle-std.shard") KB," \
    "optimized $(image_kb "$tmp/jpeg-rle.shard") KB"
echo "sa1b-shard (median of 5):"
header std opt
shard_ab "jpeg" jpeg rle rle "--jpeg-huffman standard" ""
echo "loader, 64 masks per image (median of 7 runs of 3 epochs):"
header std opt
loader_ab "jpeg" "$tmp/jpeg-rle-std.shard" "$tmp/jpeg-rle.shard"
