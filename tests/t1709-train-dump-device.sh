#!/bin/sh
# t1709: --dump-step onto an existing output that is not a regular file (a
# FIFO, a character device) writes it in place, never replaces it with a
# regular file; a write error there (a full device) is one line and exit 3.
# The devices are nodes made with mknod in the test's folder (skipped where
# mknod is not permitted), never the system's /dev/null or /dev/full.
. "$top_srcdir/tests/test-lib.sh"
synth="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 1 --threads 2 --synthetic-batch 3"
run_ok "a dump to a regular file" sa1b-train $synth --dump-step "$TMP/ref"

mkfifo "$TMP/ff"
cat "$TMP/ff" >"$TMP/got" &
cpid=$!
run_ok "a dump to a FIFO" sa1b-train $synth --dump-step "$TMP/ff"
if [ -p "$TMP/ff" ]; then wait $cpid; else kill $cpid; wait $cpid; fi
test -p "$TMP/ff"
ok $? "the FIFO is still a FIFO"
cmp -s "$TMP/ref" "$TMP/got"
ok $? "its reader got the dump"
is "$(ls "$TMP" | grep -c tmp)" "0" "no temporary left"

if mknod -m 666 "$TMP/null" c 1 3 2>/dev/null && mknod -m 666 "$TMP/full" c 1 7 2>/dev/null; then
    run_ok "a dump to a null device" sa1b-train $synth --dump-step "$TMP/null"
    test -c "$TMP/null"
    ok $? "the device is still a character device"
    run_status 3 "a dump to a full device fails" sa1b-train $synth --dump-step "$TMP/full"
    grep_ok "^sa1b-train: cannot write '$TMP/full': No space left on device$" "$TMP/.err" "in one line naming it"
    is "$(wc -l <"$TMP/.err" | tr -d ' ')" "1" "one line"
    test -c "$TMP/full"
    ok $? "the device is still a character device"
    is "$(ls "$TMP" | grep -c tmp)" "0" "no temporary left"
else
    skip 7 "mknod not permitted"
fi
done_testing
