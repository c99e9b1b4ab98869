#!/bin/sh
# t1545: two runs writing the same output at once never take each other's
# parts: each finishes its parts under names of its own, and puts its whole
# set in place.  Run A and run B (other images, the same --name) each stop
# after finishing part 0 (their input stalls on a fifo); then A ends, then
# B.  Before names of their own, B's finished part 0 replaced A's
# "k-00000.shard.partial", A put B's part 0 in its set and B failed.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
mkfifo "$TMP/fa" "$TMP/fb" "$TMP/ga" "$TMP/gb" || skip_all "no mkfifo"
sa1b-synth --quiet -n 3 -W 120 -H 80 -m 4 -s 1 -o "$TMP/a.tar" || exit 99
sa1b-synth --quiet -n 3 -W 120 -H 80 -m 4 -s 2 --first-id 100 -o "$TMP/b.tar" || exit 99
# the end of the second sample (its two members): part 0 is finished when it is written
end2() {
    /usr/bin/python3 -c 'import sys, tarfile
m = tarfile.open(sys.argv[1]).getmembers()[3]
print(m.offset_data + (m.size + 511) // 512 * 512)' "$1"
}
at_a=$(end2 "$TMP/a.tar") && at_b=$(end2 "$TMP/b.tar") || exit 99
# feed TAR's first AT bytes into FIFO, the rest once GATE is opened
feed() { { head -c "$4" "$1"; cat "$3"; tail -c +$(($4 + 1)) "$1"; } >"$2"; }
# waits until N runs are writing part 1 (so each has finished part 0)
wait_part1() {
    i=0
    while [ $i -lt 600 ] && [ "$(ls "$TMP/out" 2>/dev/null | grep -c '^k-00001\.shard\.partial.*\.tmp-')" -lt "$1" ]; do
        sleep 0.1; i=$((i + 1))
    done
    [ "$(ls "$TMP/out" 2>/dev/null | grep -c '^k-00001\.shard\.partial.*\.tmp-')" -ge "$1" ]
}
opts="-q -j 1 --image-size 32 --max-images 1 --name k -o $TMP/out"
mkdir "$TMP/out"
feed "$TMP/a.tar" "$TMP/fa" "$TMP/ga" "$at_a" & fa=$!
sa1b-shard $opts - <"$TMP/fa" 2>"$TMP/err-a" & a=$!
wait_part1 1
ok $? "run A has finished part 0 and waits for input"
feed "$TMP/b.tar" "$TMP/fb" "$TMP/gb" "$at_b" & fb=$!
sa1b-shard $opts - <"$TMP/fb" 2>"$TMP/err-b" & b=$!
wait_part1 2
ok $? "run B too"
: >"$TMP/ga"
wait $a
is "$?" "0" "run A ends: exit 0"
is "$(shard_ids "$TMP"/out/k-*.shard)" "1 2 3 " "its set holds its own images"
: >"$TMP/gb"
wait $b
is "$?" "0" "run B ends: exit 0"
is "$(shard_ids "$TMP"/out/k-*.shard)" "100 101 102 " "its set holds its own images"
is "$(ls "$TMP/out" | tr '\n' ' ')" "k-00000.shard k-00001.shard k-00002.shard " "and nothing else is left"
[ -s "$TMP/err-b" ] && sed 's/^/# B: /' "$TMP/err-b"
kill $fa $fb $a $b 2>/dev/null
done_testing
