# bench-lib.sh - sourced by the shell benchmarks: the built tools first in
# PATH; bench_workdir DIR, which sets $tmp to DIR (created, kept) or, DIR
# empty, to a temporary directory removed at exit; bench_photo_tar, the
# SA-1B-size input of the sharding benchmarks.
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
PATH="$top_builddir/trainer:$top_builddir/shard-tools:$PATH"
bench_workdir() {
    if [ -n "$1" ]; then
        tmp=$1
        mkdir -p "$tmp"
    else
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
    fi
}

# The photographs among Debian's plasma-workspace-wallpapers, each at its
# largest size (2560x1600 in Debian 12: a short side of at least 1500, as
# SA-1B's images have), one path a line; nothing without the package.
bench_photos() {
    for name in BytheWater ColdRipple DarkestHour EveningGlow FallenLeaf Grey Kite OneStandsOut Path summer_1am; do
        for f in "/usr/share/wallpapers/$name/contents/images/"*x*.jpg; do
            [ -f "$f" ] && echo "$f"
        done | awk -F/ '{ split($NF, s, "x"); print s[1] * s[2], $0 }' | sort -n | tail -1 | cut -d' ' -f2-
    done
}

# bench_real_tar N OUT: where ../shared holds a real SA-1B annotation file
# (research licence: read from there, never copied into the tree) and the
# photographs and python3-pil are there, a tar of N samples with that
# file's masks (each under its own image id) and crops of the photographs
# at its image size (tests/bench/photo_tar.py --repeat), and $real_input
# saying so; else nothing (returns 1).
bench_real_tar() {
    real_json=$(ls "$top_srcdir"/../shared/data/sa1b-real/sa_*.json 2>/dev/null | head -1)
    real_photos=$(bench_photos | tr '\n' ' ')
    [ -n "$real_json" ] && [ -n "$real_photos" ] && /usr/bin/python3 -c 'import PIL' 2>/dev/null || return 1
    # shellcheck disable=SC2086
    /usr/bin/python3 "$top_srcdir/tests/bench/photo_tar.py" --repeat "$1" "$real_json" "$2" $real_photos || return 1
    real_input="$1 images with the masks of the real annotation $(basename "$real_json") ($(/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("%dx%d, %d masks" % (d["image"]["width"], d["image"]["height"], len(d["annotations"])))' "$real_json")), crops of the same photographs"
}

# bench_photo_tar N OUT: a tar of N SA-1B-size samples (2250x1500, 100
# sa1b-synth masks each, seed 7) whose pictures are crops of those
# photographs (tests/bench/photo_tar.py), or sa1b-synth's own pictures
# where the package or python3-pil is missing (synthetic scenes decode
# faster than photographs and flatter a ratio to the decode floor).  Sets
# $photos (the photographs used, or empty) and $bench_input (what the
# input is, for the report).
bench_photo_tar() {
    sa1b-synth --quiet -n "$1" -W 2250 -H 1500 -m 100 --seed 7 -o "$2.synth"
    photos=$(bench_photos | tr '\n' ' ')
    if [ -n "$photos" ] && /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
        # shellcheck disable=SC2086
        /usr/bin/python3 "$top_srcdir/tests/bench/photo_tar.py" "$2.synth" "$2" $photos
        rm -f "$2.synth"
        bench_input="$1 images of 2250x1500, crops of $(echo "$photos" | wc -w) photographs of plasma-workspace-wallpapers, 100 synthetic masks each"
    else
        mv "$2.synth" "$2"
        photos=""
        bench_input="$1 images of 2250x1500, sa1b-synth's pictures (no plasma-workspace-wallpapers or python3-pil: synthetic scenes flatter the ratios), 100 masks each"
    fi
}
