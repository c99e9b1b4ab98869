#!/bin/sh
# Every kind of bad sample is skipped with one line naming the file and the
# problem, counted, and exit status 1; the good samples of the same tar land.
# --strict makes the first one fatal (exit 3, nothing written).
. "$top_srcdir/tests/test-lib.sh"
PY=/usr/bin/python3
have_py=0
$PY -c 'import json' 2>/dev/null && have_py=1

sa1b-synth --quiet --images 4 --width 200 --height 150 --masks 12 --seed 5 -o "$TMP/good.tar" || exit 99
mkdir "$TMP/m" && tar -xf "$TMP/good.tar" -C "$TMP/m" || exit 99
members="sa_1.jpg sa_1.json sa_2.jpg sa_2.json sa_3.jpg sa_3.json sa_4.jpg sa_4.json"

# case NAME PATTERN: shard $TMP/bad.tar; exit 1, message, 1 skipped, 3 images
check_case() {
    name=$1; pattern=$2
    sa1b-shard --json-summary --image-size 64 -o "$TMP/out.shard" "$TMP/bad.tar" > "$TMP/sum" 2> "$TMP/err"
    rc=$?
    [ $rc -eq 1 ]; ok $? "$name: exit status 1 (got $rc)"
    grep_ok "^sa1b-shard: '$TMP/bad.tar': $pattern" "$TMP/err" "$name: one line names the input, the file and the problem"
    is "$(grep -c "^sa1b-shard: '$TMP/bad.tar': sa_" "$TMP/err")" 1 "$name: exactly one problem line"
    grep_ok '"images":3,.*"skipped":1' "$TMP/sum" "$name: counted, the 3 good samples still land"
    n=$(sa1b-inspect "$TMP/out.shard" 2>/dev/null | grep -c '"type": *"image"')
    is "$n" 3 "$name: the shard holds the 3 good images"
}

# make_tar DIR [members...]: a tar of the listed members of DIR
make_tar() { d=$1; shift; (cd "$d" && tar -b 1 -cf "$TMP/bad.tar" "$@"); }

fresh() { rm -rf "$TMP/w"; cp -r "$TMP/m" "$TMP/w"; }

fresh; head -c 500 "$TMP/m/sa_2.jpg" > "$TMP/w/sa_2.jpg"; make_tar "$TMP/w" $members
check_case "corrupt jpeg" "sa_2\\.jpg: "

fresh; printf 'JFIF garbage that is not a jpeg at all' > "$TMP/w/sa_2.jpg"; make_tar "$TMP/w" $members
check_case "not a jpeg" "sa_2\\.jpg: "

fresh; cp "$TMP/m/sa_1.jpg" "$TMP/w/sa_2.jpg"
sa1b-synth --quiet --images 1 --width 210 --height 150 --masks 3 --first-id 2 -o "$TMP/other.tar" && tar -xf "$TMP/other.tar" -C "$TMP" sa_2.jpg && cp "$TMP/sa_2.jpg" "$TMP/w/sa_2.jpg"
make_tar "$TMP/w" $members
check_case "jpeg size != annotation size" "sa_2\\.jpg: size 210x150 != annotation 200x150"

if [ $have_py = 1 ]; then
    for kind in syntax schema badchar runsum size width; do
        fresh; $PY "$SRC/tests/sa1b_tamper.py" $kind "$TMP/w/sa_3.json" || exit 99
        make_tar "$TMP/w" $members
        case $kind in
        syntax) check_case "json does not parse" "sa_3\\.json: " ;;
        schema) check_case "wrong schema" "sa_3\\.json: .*annotations" ;;
        badchar) check_case "malformed rle" "sa_3\\.json: mask 0: .*character" ;;
        runsum) check_case "run sum != size" "sa_3\\.json: mask 7: run sum [0-9]+ != 150x200" ;;
        size) check_case "mask size != image size" "sa_3\\.json: mask 3: .*size" ;;
        width) check_case "absurd dimensions" "sa_3\\.json: .*width" ;;
        esac
    done
else
    skip 30 "python3 missing"
fi

fresh; make_tar "$TMP/w" sa_1.jpg sa_1.json sa_2.jpg sa_3.jpg sa_3.json sa_4.jpg sa_4.json
check_case "jpg without json" "sa_2\\.jpg: no matching sa_2\\.json"

fresh; make_tar "$TMP/w" sa_1.jpg sa_1.json sa_2.json sa_3.jpg sa_3.json sa_4.jpg sa_4.json
check_case "json without jpg" "sa_2\\.json: no matching sa_2\\.jpg"

# links named like a member (a tar of a folder of symbolic links, as a
# download cache's snapshot is, or of hard-linked copies): no data, the
# sample is skipped with one line, never silently
fresh; rm "$TMP/w/sa_2.json"; ln -s sa_1.json "$TMP/w/sa_2.json"; make_tar "$TMP/w" $members
check_case "symbolic link member" "sa_2\\.json: a symbolic link to 'sa_1\\.json', not a file: sample skipped"
fresh; ln -f "$TMP/w/sa_1.json" "$TMP/w/sa_2.json"; make_tar "$TMP/w" $members
check_case "hard link member" "sa_2\\.json: a hard link to 'sa_1\\.json', not a file: sample skipped"

# a pair that comes again (tars concatenated, two folders of one image): the
# copy is skipped with one line, not written twice
fresh; mkdir "$TMP/w/again" && cp "$TMP/w/sa_2.jpg" "$TMP/w/sa_2.json" "$TMP/w/again/"
make_tar "$TMP/w" $members again/sa_2.json again/sa_2.jpg
sa1b-shard --json-summary --image-size 64 -o "$TMP/out.shard" "$TMP/bad.tar" > "$TMP/sum" 2> "$TMP/err"
[ $? -eq 1 ]; ok $? "pair repeated: exit 1"
grep_ok "^sa1b-shard: '$TMP/bad.tar': sa_2: duplicate sample \\(sa_2\\.jpg and sa_2\\.json came before\\): this copy skipped" \
    "$TMP/err" "pair repeated: one line names the input and the sample"
grep_ok '"images":4,.*"skipped":1' "$TMP/sum" "pair repeated: counted, the 4 samples land once"
n=$(sa1b-inspect "$TMP/out.shard" 2>/dev/null | grep -c '"file_name": *"sa_2.jpg"')
is "$n" 1 "pair repeated: sa_2 once in the shard"

# two tars of one's own numbered alike (sa1b-synth's ids start at 1),
# concatenated: the pairs of the second have the first's names but other
# bytes; they are other images, not copies, and all are written
sa1b-synth --quiet --images 2 --width 200 --height 150 --masks 12 --seed 7 -o "$TMP/seven.tar" || exit 99
cat "$TMP/good.tar" "$TMP/seven.tar" > "$TMP/cat.tar" || exit 99
sa1b-shard --json-summary --image-size 64 -o "$TMP/cat.shard" "$TMP/cat.tar" > "$TMP/sum" 2> "$TMP/err"
is "$?" 0 "two tars numbered alike, concatenated: exit 0"
grep_ok '"images":6,.*"skipped":0' "$TMP/sum" "two tars numbered alike, concatenated: all 6 images written"
is "$(grep -c 'duplicate' "$TMP/err")" 0 "two tars numbered alike, concatenated: no duplicate reported"

# one image under another member name (a copy that a download renamed):
# the same image_id and file_name, written once, the copy reported
fresh; cp "$TMP/w/sa_2.jpg" "$TMP/w/sa_2 (1).jpg" && cp "$TMP/w/sa_2.json" "$TMP/w/sa_2 (1).json" || exit 99
make_tar "$TMP/w" $members "sa_2 (1).jpg" "sa_2 (1).json"
for j in 1 2; do
    sa1b-shard --json-summary -j $j --image-size 64 -o "$TMP/dup$j.shard" "$TMP/bad.tar" > "$TMP/sum" 2> "$TMP/err"
    is "$?" 1 "image renamed, -j $j: exit 1"
    grep_ok "^sa1b-shard: '$TMP/bad.tar': sa_2 \\(1\\): duplicate image \\(image_id 2, file_name 'sa_2\\.jpg', its pixels and masks came before" \
        "$TMP/err" "image renamed, -j $j: one line names the input, the member and the image"
    grep_ok '"images":4,.*"skipped":1' "$TMP/sum" "image renamed, -j $j: counted, the 4 images land once"
done
cmp -s "$TMP/dup1.shard" "$TMP/dup2.shard"
ok $? "image renamed: the same shard for -j 1 and -j 2"

# another image of the same image_id and file_name under another member name
# (two datasets of one's own numbered alike, merged into one folder, which
# renamed the second one's files): a different image, written too
fresh; sa1b-synth --quiet --images 1 --width 200 --height 150 --masks 12 --seed 6 --first-id 2 -o "$TMP/other2.tar" || exit 99
mkdir "$TMP/o2" && tar -xf "$TMP/other2.tar" -C "$TMP/o2" || exit 99
cp "$TMP/o2/sa_2.jpg" "$TMP/w/sa_2 (1).jpg" && cp "$TMP/o2/sa_2.json" "$TMP/w/sa_2 (1).json" || exit 99
cmp -s "$TMP/w/sa_2.jpg" "$TMP/w/sa_2 (1).jpg" && exit 99
make_tar "$TMP/w" $members "sa_2 (1).jpg" "sa_2 (1).json"
sa1b-shard --json-summary --image-size 64 -o "$TMP/other2.shard" "$TMP/bad.tar" > "$TMP/sum" 2> "$TMP/err"
is "$?" 0 "another image of one image_id and file_name: exit 0"
grep_ok '"images":5,.*"skipped":0' "$TMP/sum" "another image of one image_id and file_name: written, not taken for a copy"
is "$(grep -c 'duplicate' "$TMP/err")" 0 "another image of one image_id and file_name: no duplicate reported"

# a tar cut at a 512-byte boundary between the two members of the last pair
fresh; cp "$TMP/m/sa_1.jpg" "$TMP/w/sa_5.jpg"
make_tar "$TMP/w" sa_1.jpg sa_1.json sa_2.jpg sa_2.json sa_3.jpg sa_3.json sa_4.json sa_4.jpg sa_5.jpg
size=$(( $(stat -c %s "$TMP/bad.tar") - 1024 ))   # drop the two end-of-archive blocks
head -c $size "$TMP/bad.tar" > "$TMP/cut.tar"
rm -f "$TMP/out.shard" # a complete shard there would be kept, its images not counted as written
sa1b-shard --json-summary --image-size 64 -o "$TMP/out.shard" "$TMP/cut.tar" > "$TMP/sum" 2> "$TMP/err"
[ $? -eq 1 ]; ok $? "tar cut at a block boundary inside a pair: exit 1"
grep_ok "^sa1b-shard: '$TMP/cut.tar': sa_5\\.jpg: no matching sa_5\\.json" "$TMP/err" "the unpaired last member is reported"
grep_ok '"images":4,.*"skipped":1' "$TMP/sum" "the 4 complete pairs land"

# a tar cut inside a member (the last one, the unpaired sa_5.jpg)
size=$(( $(stat -c %s "$TMP/bad.tar") - 1024 - 512 * 2 - 100 ))
head -c $size "$TMP/bad.tar" > "$TMP/cut2.tar"
sa1b-shard --json-summary --image-size 64 -o "$TMP/out.shard" "$TMP/cut2.tar" > "$TMP/sum" 2> "$TMP/err"
[ $? -eq 1 ]; ok $? "tar cut inside a member: exit 1"
grep_ok "^sa1b-shard: '$TMP/cut2.tar': sa_[0-9]\\.(jpg|json): member truncated" "$TMP/err" "the truncated member is reported, with its input"
grep_ok "^sa1b-shard: '$TMP/cut2.tar': input ends early, after sample sa_4: 4 images read, the rest lost" "$TMP/err" \
    "the summary says the input ended early and how much was read"
grep_ok '"inputs_cut_short":1' "$TMP/sum" "and counts it"
sa1b-shard -q --image-size 64 -o "$TMP/stdin.shard" - <"$TMP/cut2.tar" 2>"$TMP/err"
grep_ok "^sa1b-shard: standard input: sa_[0-9]\\.(jpg|json): member truncated" "$TMP/err" "from stdin the message says so"
grep_ok '"images":4,.*"skipped":1' "$TMP/sum" "the pairs before it land, one problem reported"

# --strict: the first bad sample is fatal, nothing written
fresh; make_tar "$TMP/w" sa_1.jpg sa_1.json sa_2.jpg sa_3.jpg sa_3.json
run_status 3 "--strict: first bad sample exits 3" sa1b-shard --strict --image-size 64 -o "$TMP/strict.shard" "$TMP/bad.tar"
[ ! -e "$TMP/strict.shard" ] && [ -z "$(ls "$TMP" | grep 'strict.shard')" ]
ok $? "--strict: no output and no temporary file left"

# fatal inputs
printf 'this is not a tar archive, just some text that goes on for a while\n%.0s' 1 2 3 4 5 6 7 8 9 10 > "$TMP/text.tar"
run_status 3 "not a tar: exit 3" sa1b-shard --image-size 64 -o "$TMP/x.shard" "$TMP/text.tar"
grep_ok "text.tar': " "$TMP/.err" "not a tar: one line naming the input"
[ ! -e "$TMP/x.shard" ]; ok $? "not a tar: no output"
run_status 3 "missing input: exit 3" sa1b-shard --image-size 64 -o "$TMP/y.shard" "$TMP/nope.tar"
: > "$TMP/empty.tar"
run_status 3 "empty input: exit 3" sa1b-shard --image-size 64 -o "$TMP/z.shard" "$TMP/empty.tar"
run_status 3 "unwritable output: exit 3" sa1b-shard --image-size 64 -o "$TMP/no/such/dir/x.shard" "$TMP/good.tar"

# usage
run_status 2 "no -o: usage error" sa1b-shard "$TMP/good.tar"
run_status 2 "no input: usage error" sa1b-shard -o "$TMP/u.shard"
run_status 2 "bad strategy: usage error" sa1b-shard --strategy best -o "$TMP/u.shard" "$TMP/good.tar"
run_status 2 "mask bigger than image: usage error" sa1b-shard --image-size 64 --mask-size 65 -o "$TMP/u.shard" "$TMP/good.tar"
run_status 2 "bad number: usage error" sa1b-shard --max-masks x -o "$TMP/u.shard" "$TMP/good.tar"
run_status 2 "unknown option: usage error" sa1b-shard --frobnicate -o "$TMP/u.shard" "$TMP/good.tar"
# the output pointed at the input: refused in one line naming it, the input intact
cp "$TMP/good.tar" "$TMP/self.tar"
run_status 2 "output named as the input: usage error" sa1b-shard -o "$TMP/self.tar" "$TMP/self.tar"
grep_ok "^sa1b-shard: '$TMP/self.tar' is not a directory .OUT is the shard file only with one input" "$TMP/.err" \
    "output named as the input: the line names it and says what OUT may be"
cmp -s "$TMP/good.tar" "$TMP/self.tar"
ok $? "output named as the input: the input is untouched"
run_ok "--help" sa1b-shard --help
grep_ok '^Usage: sa1b-shard' "$TMP/.out" "--help prints usage on stdout"
run_ok "--version" sa1b-shard --version
grep_ok '^sa1b-shard \(sa1b\) [0-9]' "$TMP/.out" "--version names the program and version"
done_testing
