#!/bin/sh
# t1201-synth-determinism.sh - the same arguments give the same bytes; the
# seed changes the scenes; image i depends on (seed, i) only; stdout and -o
# write the same tar.
. "$top_srcdir/tests/test-lib.sh"

S="-W 160 -H 120 -m 10"
run_ok "seed 7, first run" sa1b-synth -n 3 $S -s 7 -o "$TMP/a.tar"
run_ok "seed 7, second run" sa1b-synth -n 3 $S -s 7 -o "$TMP/b.tar"
cmp -s "$TMP/a.tar" "$TMP/b.tar"
ok $? "same seed: identical bytes"
run_ok "seed 8" sa1b-synth -n 3 $S -s 8 -o "$TMP/c.tar"
! cmp -s "$TMP/a.tar" "$TMP/c.tar"
ok $? "different seed: different bytes"
sa1b-synth -n 3 $S -s 7 >"$TMP/d.tar"
ok $? "writes to stdout without -o"
cmp -s "$TMP/a.tar" "$TMP/d.tar"
ok $? "stdout and -o give the same tar"
sa1b-synth -n 3 $S -s 7 -o - >"$TMP/e.tar"
cmp -s "$TMP/a.tar" "$TMP/e.tar"
ok $? "-o - is stdout"

# image 0 of a 3-image run is the 1-image run's image; --first-id renames only
mkdir "$TMP/x1" "$TMP/x3" "$TMP/x9"
sa1b-synth -n 1 $S -s 7 -o "$TMP/one.tar" &&
    sa1b-synth -n 1 $S -s 7 --first-id 9 -o "$TMP/nine.tar"
ok $? "one-image runs"
(cd "$TMP/x1" && tar xf ../one.tar) && (cd "$TMP/x3" && tar xf ../a.tar) &&
    (cd "$TMP/x9" && tar xf ../nine.tar)
ok $? "tars extract"
cmp -s "$TMP/x1/sa_1.jpg" "$TMP/x3/sa_1.jpg" && cmp -s "$TMP/x1/sa_1.json" "$TMP/x3/sa_1.json"
ok $? "image 1 does not depend on --images"
cmp -s "$TMP/x1/sa_1.jpg" "$TMP/x9/sa_9.jpg"
ok $? "--first-id keeps the picture"
sed 's/"sa_1.jpg"/"sa_9.jpg"/; s/"image_id": 1,/"image_id": 9,/' "$TMP/x1/sa_1.json" |
    sed 's/"id": 21474856\([0-9][0-9]\)/"id": 21474936\1/g' >"$TMP/renamed.json"
cmp -s "$TMP/renamed.json" "$TMP/x9/sa_9.json"
ok $? "--first-id changes file name, image_id and annotation ids only"
! cmp -s "$TMP/x3/sa_1.jpg" "$TMP/x3/sa_2.jpg"
ok $? "images of one run differ"

# member names and order: jpg then json, ids counting up
tar tf "$TMP/a.tar" >"$TMP/list"
printf 'sa_1.jpg\nsa_1.json\nsa_2.jpg\nsa_2.json\nsa_3.jpg\nsa_3.json\n' >"$TMP/want"
cmp -s "$TMP/list" "$TMP/want"
ok $? "members sa_N.jpg, sa_N.json in order"
tar tvf "$TMP/a.tar" | awk '{print $1, $2, $4, $5}' | sort -u >"$TMP/hdr"
is "$(cat "$TMP/hdr")" "-rw-r--r-- root/root 2023-04-01 00:00" "fixed mode, owner and time"

done_testing
