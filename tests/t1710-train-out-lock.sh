#!/bin/sh
# t1710: a training run holds an exclusive lock (flock) on its --out folder
# for its whole life: a second run there (new with --overwrite, or
# --resume) is refused at once with one line naming the folder and the
# process, exit 2, and changes nothing; once the first ends, --resume goes on.
. "$top_srcdir/tests/test-lib.sh"
common="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 1 --synthetic-batch 7 --threads 1 -q"

# a run that stays until it is told to stop (SIGTERM: checkpoint, exit 130)
sa1b-train $common --steps 1000000 --log-every 1 --ckpt-every 2 --out "$TMP/a" 2>"$TMP/a.err" &
pid=$!
i=0
while [ ! -s "$TMP/a/latest" ] && [ $i -lt 1200 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
test -s "$TMP/a/latest"
ok $? "the first run has written a checkpoint"
run_status 2 "a second run with --overwrite is refused" sa1b-train $common --steps 4 --out "$TMP/a" --overwrite
grep_ok "^sa1b-train: output folder '$TMP/a' is in use by another sa1b-train run \(process $pid\)" "$TMP/.err" \
    "the line names the folder and the process"
is "$(wc -l <"$TMP/.err" | tr -d ' ')" "1" "in one line"
run_status 2 "--resume of the running run is refused" sa1b-train --resume "$TMP/a" -q --steps 4
grep_ok "is in use by another sa1b-train run" "$TMP/.err" "for the same reason"
# (the first run goes on writing checkpoints: its own temporaries may be there)
test -e "$TMP/a/model-2.safetensors" &&
    ! ls "$TMP/a" | grep '\.tmp' | grep -qv -e "\.tmp\.$pid\.[0-9]*\$" -e '^latest\.tmp$' -e '^log\.jsonl\.tmp$'
ok $? "the first run's files are there, no temporary of the others"
kill -TERM $pid
wait $pid
is "$?" "130" "the first run stops on SIGTERM with a checkpoint"
step=$(cat "$TMP/a/latest")
run_ok "once it has ended, --resume goes on" sa1b-train --resume "$TMP/a" -q --steps $((step + 2))
is "$(cat "$TMP/a/latest")" "$((step + 2))" "to its new last step"

if command -v flock >/dev/null 2>&1; then
    run_status 2 "a folder locked by another process is refused" \
        flock "$TMP/a/.sa1b-train.lock" sa1b-train --resume "$TMP/a" -q --steps $((step + 4))
    is "$(cat "$TMP/a/latest")" "$((step + 2))" "and nothing in it changes"
    # the lock is a file of its own: a tool that locks the folder (sa1b-shard's commit) is not held up
    if command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null; then
        sa1b-synth -n 2 -W 120 -H 80 -m 3 -o "$TMP/s.tar" --quiet
        flock "$TMP/a/.sa1b-train.lock" timeout 60 sa1b-shard -q --image-size 32 -o "$TMP/a/s.shard" "$TMP/s.tar"
        ok $? "sa1b-shard writes into a folder whose training run holds its lock"
    else
        skip 1 "sa1b-synth or sa1b-shard not built"
    fi
else
    skip 3 "no flock(1)"
fi

# two new runs into one folder that does not exist yet: B has looked into
# it (nothing there) and is held back by strace just as it creates it, A
# runs there to its end meanwhile; then B takes the lock, finds A's run and
# is refused (before: B started afresh over A's run, its log and checkpoints)
if command -v strace >/dev/null && command -v pgrep >/dev/null && [ "$(uname -m)" = x86_64 ] &&
    strace -f -qq -o /dev/null -e trace=mkdir true 2>/dev/null; then
    # (LeakSanitizer cannot run under ptrace: off for B in the sanitizer build)
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        strace -f -qq -o /dev/null -e trace=mkdir -e inject=mkdir:delay_enter=100000000 \
        sa1b-train $common --steps 2 --ckpt-every 1 --seed 5 --out "$TMP/r" 2>"$TMP/b.err" & s=$!
    i=0 at=""
    while [ $i -lt 1200 ] && [ -z "$at" ]; do # B stopped in mkdir(2) (83 on x86_64)
        c=$(pgrep -P $s)
        if [ -n "$c" ] && [ "$(awk '{ print $3 }' "/proc/$c/stat" 2>/dev/null)" = t ] &&
            read -r nr _ <"/proc/$c/syscall" 2>/dev/null && [ "$nr" = 83 ]; then
            at=1
        else
            sleep 0.05
        fi
        i=$((i + 1))
    done
    ok $((!${at:-0})) "run B is held where it creates the folder"
    run_ok "run A into the same new folder" sa1b-train $common --steps 3 --ckpt-every 1 --out "$TMP/r"
    kill -TERM $s # strace lets B go
    wait $s
    is "$?" "2" "run B, let go: exit 2"
    grep_ok "^sa1b-train: output folder '$TMP/r' holds a run with a checkpoint of step 3 " "$TMP/b.err" "one line says why"
    is "$(cat "$TMP/r/latest")" "3" "A's run is whole"
else
    skip 5 "no strace (Debian: strace) or not x86_64"
fi

# temporaries a killed run left (its own, and a NAME.tmp of older versions)
# go when the next run takes the lock; a file that only looks like one stays
: >"$TMP/a/model-2.safetensors.tmp.99999.0"
: >"$TMP/a/state-2.bin.tmp"
: >"$TMP/a/log.jsonl.tmp.notes"
run_ok "--resume once more" sa1b-train --resume "$TMP/a" -q --steps $((step + 3))
test ! -e "$TMP/a/model-2.safetensors.tmp.99999.0" && test ! -e "$TMP/a/state-2.bin.tmp"
ok $? "removes the temporaries a killed run left"
test -e "$TMP/a/log.jsonl.tmp.notes"
ok $? "not a file that only looks like one"

# a run folder shared by a group: another user resumes the run; the lock
# file the first run left (its mode 0644) needs no write access (flock(2));
# before, "cannot create '.../.sa1b-train.lock' ...: Permission denied", exit 3
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && chmod 755 "$TMP" && mkdir -p "$TMP/sh" && chmod 777 "$TMP/sh" &&
    as_nobody test -w "$TMP/sh" 2>/dev/null; then
    sa1b-train $common --steps 2 --ckpt-every 2 --out "$TMP/sh" >/dev/null 2>&1
    as_nobody sa1b-train --resume "$TMP/sh" -q --steps 4 >/dev/null 2>"$TMP/sh.err"
    is "$?:$(cat "$TMP/sh.err"):$(cat "$TMP/sh/latest")" "0::4" "another user resumes a run in a shared folder"
else
    skip 1 "not root, no setpriv(1), or nobody cannot write the test's folder"
fi
done_testing
