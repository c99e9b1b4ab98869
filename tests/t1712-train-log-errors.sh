#!/bin/sh
# t1712: a log.jsonl that cannot be written is an error: the failed write
# is reported once (one line naming the file and the step), the checkpoints
# are still written, and the run ends with exit 3; a resume whose log
# cannot be trimmed (a full disk) ends in one line with the log as it was
# and no log.jsonl.tmp left; a resume drops a last record cut short, which
# its first record would otherwise continue (one whole but for its newline
# gets it); the log is synced before latest names a checkpoint.
# SA1B_TEST_LOG_FULL=N sends the log's records from step N on to /dev/full;
# the full disk is a tmpfs in a mount namespace of its own (skipped where
# that is not permitted).
. "$top_srcdir/tests/test-lib.sh"
common="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 1 --synthetic-batch 5 --threads 2 -q"
if [ -w /dev/full ]; then
    SA1B_TEST_LOG_FULL=3 sa1b-train $common --steps 6 --log-every 1 --ckpt-every 2 --out "$TMP/a" 2>"$TMP/err"
    is "$?" "3" "a run whose log fills the disk at step 3 ends with exit 3"
    grep_ok "^sa1b-train: cannot write '$TMP/a/log.jsonl' at step 3: No space left on device" "$TMP/err" \
        "the line names the file, the step and why"
    is "$(wc -l <"$TMP/err" | tr -d ' ')" "1" "once"
    is "$(cat "$TMP/a/latest")" "6" "training went on to its last checkpoint"
    test -s "$TMP/a/model-6.safetensors" && test -s "$TMP/a/state-6.bin"
    ok $? "which is complete"
else
    skip 5 "no /dev/full"
fi

run_ok "a run to resume" sa1b-train $common --steps 4 --log-every 1 --ckpt-every 2 --out "$TMP/r"
printf '%s\n' '{"step": 5, "killed": "after the checkpoint"}' >>"$TMP/r/log.jsonl"
cksum <"$TMP/r/log.jsonl" >"$TMP/log.sum"
u=""
if unshare -m true 2>/dev/null; then u="unshare -m"; elif unshare -rm true 2>/dev/null; then u="unshare -rm"; fi
[ -n "$u" ] && $u sh -c 'mkdir "$1/m" && mount -t tmpfs -o size=32m tmpfs "$1/m" 2>/dev/null || exit 0
    cp -r "$1/r" "$1/m/r" || exit 0
    dd if=/dev/zero of="$1/m/fill" bs=4k 2>/dev/null
    sa1b-train --resume "$1/m/r" -q --steps 6 2>"$1/err"
    echo $? >"$1/rc"
    cksum <"$1/m/r/log.jsonl" >"$1/log.after"; ls "$1/m/r" >"$1/ls.after"' sh "$TMP"
if [ -s "$TMP/rc" ]; then
    is "$(cat "$TMP/rc")" "3" "a resume on a full disk ends with exit 3"
    grep_ok "^sa1b-train: cannot trim '$TMP/m/r/log.jsonl' to step 4: No space left on device" "$TMP/err" "in one line"
    cmp -s "$TMP/log.sum" "$TMP/log.after"
    ok $? "the log is as it was"
    is "$(grep -c tmp "$TMP/ls.after")" "0" "no log.jsonl.tmp left"
else
    skip 4 "no mount namespace for a full tmpfs"
fi

# A record cut short (no newline) by a full disk, after which the run went
# on to a later checkpoint (the line says it does), is dropped by the
# resume: never the start of the resumed run's first record's line.
run_ok "a run whose log ends in a cut record" sa1b-train $common --steps 4 --log-every 1 --ckpt-every 2 --out "$TMP/c"
head -c -40 "$TMP/c/log.jsonl" >"$TMP/cut" && cat "$TMP/cut" >"$TMP/c/log.jsonl"
run_ok "resumed" sa1b-train --resume "$TMP/c" -q --steps 6
is "$(grep -cv '^{"step": [0-9]*, [^{]*}$' "$TMP/c/log.jsonl")" "0" "every line of the log is one whole record"
is "$(grep -c '^{"step": 5, ' "$TMP/c/log.jsonl")" "1" "the resumed run's first record is there"
is "$(grep -c '^{"step": 4, ' "$TMP/c/log.jsonl")" "0" "the cut one is not"
run_ok "a run whose last record lacks only its newline" sa1b-train $common --steps 4 --log-every 1 --ckpt-every 2 \
    --out "$TMP/n"
head -c -1 "$TMP/n/log.jsonl" >"$TMP/cut" && cat "$TMP/cut" >"$TMP/n/log.jsonl"
run_ok "resumed" sa1b-train --resume "$TMP/n" -q --steps 5
is "$(grep -cv '^{"step": [0-9]*, [^{]*}$' "$TMP/n/log.jsonl"):$(grep -c '^{"step": [45], ' "$TMP/n/log.jsonl")" "0:2" \
    "keeps that record, on a line of its own"

# the log's records reach the disk before latest names a checkpoint: after a
# crash, a resumed run never writes the records of steps up to its
# checkpoint again (before: the log was never synced; a power cut could
# leave latest at step 4 and the log without steps 1-4, for good)
if command -v strace >/dev/null && strace -f -qq -o /dev/null -e trace=fsync true 2>/dev/null; then
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -y -o "$TMP/trace" \
        -e trace=fsync,rename sa1b-train $common --steps 4 --log-every 1 --ckpt-every 2 --out "$TMP/y"
    sed -n -e 's/.*fsync([0-9]*<.*\/log\.jsonl>.*/log/p' -e 's/.*rename(".*\/latest\.tmp".*/latest/p' "$TMP/trace" \
        | tr '\n' ' ' >"$TMP/order"
    is "$(cat "$TMP/order")" "log latest log latest " "the log is synced before each rename of latest"
else
    skip 1 "no strace (Debian: strace)"
fi
done_testing
