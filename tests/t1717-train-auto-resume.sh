#!/bin/sh
# t1717: --auto-resume, the one command a scheduler can run again and again
# (a requeued or preempted job): it starts the run in --out when there is
# none, continues it from OUT/latest when there is one (bit for bit as an
# uninterrupted run), does nothing to a finished run, starts afresh over a
# run killed before its first checkpoint (and says so), refuses a command
# whose settings contradict the run's without changing anything, and drops
# --init once the run has a checkpoint.
. "$top_srcdir/tests/test-lib.sh"
common="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 2 --synthetic-batch 11 --threads 2 -q"
run="$common --steps 12 --warmup 2 --log-every 1 --ckpt-every 4"
run_ok "an uninterrupted run" sa1b-train $run --out "$TMP/ref"

# killed after step 6 (SIGTERM: a checkpoint of step 6), then the same command
SA1B_TEST_KILL=step:6 sa1b-train $run --auto-resume --out "$TMP/a" >"$TMP/k.out" 2>"$TMP/k.err"
is "$?" "130" "the first attempt is stopped after step 6"
is "$(cat "$TMP/a/latest")" "6" "with a checkpoint of step 6"
run_ok "the same command again continues it" sa1b-train $run --auto-resume --out "$TMP/a"
cmp -s "$TMP/ref/model-12.safetensors" "$TMP/a/model-12.safetensors"
ok $? "the final checkpoint equals the uninterrupted run's"
sed 's/.*"loss": \([0-9.e+-]*\),.*/\1/' "$TMP/ref/log.jsonl" >"$TMP/ref.loss"
sed 's/.*"loss": \([0-9.e+-]*\),.*/\1/' "$TMP/a/log.jsonl" >"$TMP/a.loss"
cmp -s "$TMP/ref.loss" "$TMP/a.loss"
ok $? "and so do the losses of every step, logged once each"

snap() { (cd "$1" && ls && cksum ./*) } # (names and bytes: a resume rewrites the log, the same records)
snap "$TMP/a" >"$TMP/before"
sa1b-train $run --auto-resume --out "$TMP/a" >"$TMP/f.out" 2>"$TMP/f.err"
is "$?" "0" "a finished run: the command again succeeds"
snap "$TMP/a" >"$TMP/after"
cmp -s "$TMP/before" "$TMP/after"
ok $? "and changes nothing"
run_status 2 "a command that contradicts the run is refused" sa1b-train $run --lr 1e-3 --auto-resume --out "$TMP/a"
grep_ok "^sa1b-train: --lr 0.001 contradicts the run in '$TMP/a'" "$TMP/.err" "naming the option and the run"
snap "$TMP/a" >"$TMP/after"
cmp -s "$TMP/before" "$TMP/after"
ok $? "and changes nothing"
run_ok "--steps given higher goes on" sa1b-train $common --steps 14 --warmup 2 --log-every 1 --ckpt-every 4 \
    --auto-resume --out "$TMP/a"
is "$(cat "$TMP/a/latest")" "14" "to the new total"

# a run killed before its first checkpoint (a log of step records, the last
# one cut short; no latest): a new run, said in one line; other files stay
mkdir "$TMP/l" && { head -1 "$TMP/ref/log.jsonl"; sed -n 2p "$TMP/ref/log.jsonl" | head -c 50; } >"$TMP/l/log.jsonl" &&
    echo notes >"$TMP/l/notes.txt"
: >"$TMP/l/model-2.safetensors.tmp.123.0"
sa1b-train $run --steps 4 --auto-resume --out "$TMP/l" >"$TMP/l.out" 2>"$TMP/l.err"
is "$?" "0" "a folder whose run has no checkpoint: a new run"
is "$(cat "$TMP/l.err")" "sa1b-train: output folder '$TMP/l' holds the log of a run killed before its first checkpoint: a new run (--auto-resume) replaces it" \
    "the line says so"
is "$(wc -l <"$TMP/l/log.jsonl" | tr -d ' '):$(ls "$TMP/l" | grep -c tmp)" "4:0" "its log is the new run's, the temporary gone"
is "$(cat "$TMP/l/notes.txt")" "notes" "other files stay"
# anything more than that is never replaced: two model files, a model file
# kept there without a log, a log that is not sa1b-train's (exit 2,
# nothing changes)
mkdir "$TMP/c" && cp "$TMP/ref/model-4.safetensors" "$TMP/ref/model-8.safetensors" "$TMP/c/" &&
    head -4 "$TMP/ref/log.jsonl" >"$TMP/c/log.jsonl"
mkdir "$TMP/m" && cp "$TMP/ref/model-12.safetensors" "$TMP/m/"
mkdir "$TMP/n" && echo '{"event": "my notes"}' >"$TMP/n/log.jsonl"
# (another trainer's JSON lines, as json.dumps writes them; a line longer
# than a record; a record, then binary bytes)
mkdir "$TMP/p" && printf '{"step": 100, "train/loss": 0.5}\n{"step": 200, "train/loss": 0.4}\n' >"$TMP/p/log.jsonl"
mkdir "$TMP/q" && { printf '{"step": 1, "loss": '; head -c 5000 /dev/zero | tr '\0' 7; printf '}\n'; } >"$TMP/q/log.jsonl"
mkdir "$TMP/r" && { printf '{"step": 1, "loss": 2}\n{"step": '; printf '\001\002\377binary'; } >"$TMP/r/log.jsonl"
# (a json.dumps log of {"step", "loss"} dicts; a cut record with a zero
# byte and then other bytes)
mkdir "$TMP/s" && printf '{"step": 100, "loss": 0.5}\n{"step": 200, "loss": 0.4, "acc": 0.9}\n' >"$TMP/s/log.jsonl"
mkdir "$TMP/t" && { head -2 "$TMP/ref/log.jsonl"; printf '{"step": 3\000'; printf 'my data \001\377\n'; } >"$TMP/t/log.jsonl"
for d in c m n p q r s t; do
    snap "$TMP/$d" >"$TMP/$d.before"
    run_status 2 "--auto-resume never replaces more than a killed start's log ($d)" sa1b-train $run --auto-resume \
        --out "$TMP/$d"
    snap "$TMP/$d" | cmp -s - "$TMP/$d.before"
    ok $? "($d) nothing in the folder changed"
done
grep_ok "^sa1b-train: output folder '$TMP/t' has no checkpoint to continue \(no 'latest'\) but holds 'log.jsonl' that is not a log of sa1b-train's, which --auto-resume never replaces" \
    "$TMP/.err" "the line names the file"
# the zeros a crash may leave at the end of a log are a cut record's
mkdir "$TMP/z" && { head -3 "$TMP/ref/log.jsonl"; head -c 100 /dev/zero; } >"$TMP/z/log.jsonl"
run_ok "a log of records ending in zeros (a crash) is a killed start's" sa1b-train $run --steps 2 --auto-resume --out "$TMP/z"
run_status 2 "--init inside such a folder is refused too" sa1b-train $run --init "$TMP/m/model-12.safetensors" \
    --auto-resume --out "$TMP/m"
test -s "$TMP/m/model-12.safetensors"
ok $? "and the folder keeps its files"

# --init starts the run; once it has a checkpoint, the run's weights win
run_ok "--init with --auto-resume starts from the weights" sa1b-train $common --steps 4 --warmup 2 --ckpt-every 4 \
    --init "$TMP/ref/model-12.safetensors" --auto-resume --out "$TMP/i"
run_ok "the same command with more steps continues it" sa1b-train $common --steps 8 --warmup 2 --ckpt-every 4 \
    --init "$TMP/ref/model-12.safetensors" --auto-resume --out "$TMP/i"
is "$(cat "$TMP/i/latest")" "8" "from its checkpoint"
run_ok "(the same with --out, then --resume)" sa1b-train $common --steps 4 --warmup 2 --ckpt-every 4 \
    --init "$TMP/ref/model-12.safetensors" --out "$TMP/j"
run_ok "(its --resume)" sa1b-train --resume "$TMP/j" --steps 8 -q
cmp -s "$TMP/i/model-8.safetensors" "$TMP/j/model-8.safetensors"
ok $? "the continued run equals a --resume of the same checkpoint"

# a folder whose files are refused while another run holds its lock (a
# run writing its first checkpoint): told that it is in use, not to move
# the files away
if command -v flock >/dev/null 2>&1; then
    mkdir "$TMP/v" && cp "$TMP/ref/model-4.safetensors" "$TMP/v/" && : >"$TMP/v/.sa1b-train.lock"
    run_status 2 "a folder in use" flock "$TMP/v/.sa1b-train.lock" sa1b-train $run --auto-resume --out "$TMP/v"
    grep_ok "^sa1b-train: output folder '$TMP/v' is in use by another sa1b-train run" "$TMP/.err" \
        "is said to be in use"
else
    skip 2 "no flock"
fi
# a SIGKILL inside the first checkpoint, between its model file and its
# state file (the log has reached its step): a killed start, replaced
mkdir "$TMP/w" && cp "$TMP/ref/model-4.safetensors" "$TMP/w/" && head -4 "$TMP/ref/log.jsonl" >"$TMP/w/log.jsonl"
sa1b-train $run --auto-resume --out "$TMP/w" >/dev/null 2>"$TMP/w.err"
is "$?:$(cat "$TMP/w/latest")" "0:12" "a first checkpoint cut before its state: a new run"
cmp -s "$TMP/ref/model-12.safetensors" "$TMP/w/model-12.safetensors"
ok $? "bit for bit (the cut model file replaced)"
# the replacement removes the log last, after the cut checkpoint and the
# temporaries: a kill in between leaves files beside their log, which the
# next start tells apart, never checkpoint files alone, which it refuses
# for good (the log went first in readdir's order before)
if command -v strace >/dev/null && strace -f -qq -o /dev/null -e trace=unlink true 2>/dev/null; then
    mkdir "$TMP/wo" && cp "$TMP/ref/model-4.safetensors" "$TMP/wo/" && head -4 "$TMP/ref/log.jsonl" >"$TMP/wo/log.jsonl"
    for i in $(seq 1 24); do : >"$TMP/wo/model-4.safetensors.tmp.$i.0"; done
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -o "$TMP/wo.trace" \
        -e trace=unlink,unlinkat sa1b-train $run --steps 4 --auto-resume --out "$TMP/wo" >/dev/null 2>&1
    st=$?
    sed -n 's/.*unlink[at]*(.*"[^"]*\/\([^"/]*\)".*= 0$/\1/p' "$TMP/wo.trace" | grep -v '^\.sa1b' >"$TMP/wo.order"
    is "$st:$(wc -l <"$TMP/wo.order" | tr -d ' '):$(tail -1 "$TMP/wo.order")" "0:26:log.jsonl" \
        "the cut checkpoint's replacement removes its 25 other files, then the log"
else
    skip 1 "no strace (Debian: strace)"
fi
# ... also where the log has no record yet (--log-every above the step)
mkdir "$TMP/w2" && cp "$TMP/ref/model-4.safetensors" "$TMP/w2/" && : >"$TMP/w2/log.jsonl"
run_status 2 "--init naming that model file is refused" sa1b-train $run --init "$TMP/w2/model-4.safetensors" \
    --auto-resume --out "$TMP/w2"
test -s "$TMP/w2/model-4.safetensors"
ok $? "and it stays"
sa1b-train $run --auto-resume --out "$TMP/w2" >/dev/null 2>&1
is "$?:$(cat "$TMP/w2/latest")" "0:12" "a cut first checkpoint beside an empty log: a new run"
# a run killed between its first checkpoint's files and latest: the next
# start has latest name that checkpoint and goes on, bit for bit
SA1B_TEST_KILL=step:4 sa1b-train $run --out "$TMP/u" >/dev/null 2>&1
rm "$TMP/u/latest" && : >"$TMP/u/latest.tmp"
sa1b-train $run --auto-resume --out "$TMP/u" >"$TMP/u.out" 2>"$TMP/u.err"
is "$?:$(cat "$TMP/u/latest")" "0:12" "a checkpoint latest did not name yet: the run goes on from it"
grep_ok "holds the checkpoint of step 4 that 'latest' did not name yet" "$TMP/u.err" "and says so"
cmp -s "$TMP/ref/model-12.safetensors" "$TMP/u/model-12.safetensors"
ok $? "bit for bit"
# a first checkpoint that a full disk cut (its model written, its state
# not): no half checkpoint left, and the next start, with room, runs
msize=$(wc -c <"$TMP/ref/model-4.safetensors") ssize=$(wc -c <"$TMP/ref/state-4.bin")
u=""
if unshare -m true 2>/dev/null; then u="unshare -m"; elif unshare -rm true 2>/dev/null; then u="unshare -rm"; fi
# shellcheck disable=SC2016
[ -n "$u" ] && $u sh -c 'mkdir "$1/fm" && mount -t tmpfs -o size=$(( ($3 + $4 / 2) / 1024 + 64 ))k tmpfs "$1/fm" 2>/dev/null || exit 0
    sa1b-train $2 --auto-resume --out "$1/fm/r" >/dev/null 2>"$1/fm.err"; echo $? >"$1/fm.rc"; ls "$1/fm/r" >"$1/fm.ls"
    mount -o remount,size=64m "$1/fm" && sa1b-train $2 --auto-resume --out "$1/fm/r" >/dev/null 2>"$1/fm2.err"
    echo $? >"$1/fm2.rc"; cmp -s "$1/ref/model-12.safetensors" "$1/fm/r/model-12.safetensors"; echo $? >"$1/fm.cmp"' \
    sh "$TMP" "$run" "$msize" "$ssize"
if [ -s "$TMP/fm.rc" ]; then
    is "$(cat "$TMP/fm.rc"):$(grep -c 'model-\|state-\|latest' "$TMP/fm.ls")" "3:0" \
        "a full disk at the first checkpoint: exit 3, no half checkpoint left"
    is "$(cat "$TMP/fm2.rc"):$(cat "$TMP/fm.cmp")" "0:0" "the next start, with room, runs the whole run (bit for bit)"
else
    skip 2 "no mount namespace for a small tmpfs"
fi

for bad in "--resume $TMP/a" "--overwrite" "--plan"; do
    run_status 2 "--auto-resume with $bad is refused" sa1b-train $run --auto-resume --out "$TMP/x" $bad
done
run_status 2 "--auto-resume without --out is refused" sa1b-train $run --auto-resume
test -e "$TMP/x"
ok $((!$?)) "no folder made by a refused command"
done_testing
