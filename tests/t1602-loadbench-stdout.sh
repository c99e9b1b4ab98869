#!/bin/sh
# t1602-loadbench-stdout.sh - sa1b-loadbench checks standard output after
# its last line: a summary or ids that could not be written (a full device)
# are one line "standard output: REASON" and exit 3, never exit 0.
. "${top_srcdir:-.}/tests/test-lib.sh"
[ -w /dev/full ] || skip_all "/dev/full missing"

sa1b-synth -n 4 -W 120 -H 90 -m 4 -s 3 -o "$TMP/a.tar" --quiet &&
sa1b-shard -q --image-size 32 --mask-size 8 -o "$TMP/a.shard" "$TMP/a.tar" || exit 99

for args in "-b 2" "-b 2 --print-ids"; do
    # shellcheck disable=SC2086
    sa1b-loadbench $args "$TMP/a.shard" > /dev/full 2> "$TMP/full.err"
    is "$?" 3 "$args > /dev/full: exit 3"
    grep_ok "^sa1b-loadbench: standard output: No space left on device$" "$TMP/full.err" "... and why"
    is "$(grep -c 'standard output' "$TMP/full.err")" 1 "... said once"
done
sa1b-loadbench -q -b 2 "$TMP/a.shard" > /dev/full
is "$?" 0 "-q > /dev/full: nothing printed, exit 0"

done_testing
