#!/bin/sh
# t1312-shard-stdout.sh - sa1b-verify and sa1b-inspect check standard output
# at the end: results that could not be written (a full device) are one
# line "standard output: REASON" and exit 3, never a silent exit 0.
. "$top_srcdir/tests/test-lib.sh"
GEN="$BUILD/tests/test-shard-gen"
cd "$TMP" || exit 99
[ -w /dev/full ] || skip_all "/dev/full missing"

mkdir d || exit 99
"$GEN" gen d/good.shard -n 4 -s 32 -r 8 -m 5 --seed 9 || exit 99
sa1b-inspect --manifest d/good.shard > m.json || exit 99
run_ok "the manifest checks" sa1b-verify -q --manifest m.json d

full() { # DESC TOOL ARGS...: TOOL ARGS > /dev/full exits 3 with one line
    desc=$1; tool=$2; shift
    "$@" > /dev/full 2> full.err
    is "$?" 3 "$desc > /dev/full: exit 3"
    # (--stats' throughput line goes to standard error too)
    is "$(grep -v ' checked in ' full.err)" "$tool: standard output: No space left on device" \
        "... one line saying why"
}
full "verify FILE" sa1b-verify d/good.shard
full "verify --stats FILE" sa1b-verify --stats d/good.shard
full "verify --manifest" sa1b-verify --manifest m.json d
full "inspect FILE" sa1b-inspect d/good.shard
full "inspect --summary" sa1b-inspect --summary d/good.shard
full "inspect --masks" sa1b-inspect --masks d/good.shard
full "inspect --manifest" sa1b-inspect --manifest d/good.shard
# -q prints no result, so there is nothing to lose
sa1b-verify -q d/good.shard > /dev/full
is "$?" 0 "verify -q > /dev/full: exit 0"

done_testing
