#!/bin/sh
# t1718: contrib/sa1b-train.sbatch, the training run as a Slurm job that a
# time limit, a preemption or a failed node stops and starts again, run
# without Slurm (SLURM_JOB_ID set, a stand-in scontrol that logs its
# arguments): USR1 (Slurm's --signal=B:USR1 before the time limit) stops
# sa1b-train with a checkpoint and requeues the job; TERM (a preemption)
# stops it with a checkpoint and requeues nothing (Slurm does); each start
# continues the run, and the run in starts ends bit-identical to the run in
# one go; a finished run's start ends at once; usage and --help.
. "$top_srcdir/tests/test-lib.sh"
R="$SRC/contrib/sa1b-train.sbatch"
mkdir -p "$TMP/bin" && cat >"$TMP/bin/scontrol" <<EOF
#!/bin/sh
echo "\$*" >>"$TMP/scontrol.log"
EOF
chmod +x "$TMP/bin/scontrol"
PATH="$TMP/bin:$PATH"
export SLURM_JOB_ID=4242
opts="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 2 --synthetic-batch 11 --threads 1 -q
      --steps 100000 --warmup 2 --log-every 1 --ckpt-every 100000"

# one start of the job, stopped by signal SIG once it has logged N more steps
# than the log holds, sent to the script (Slurm's --signal=B:) or with
# "group" to every process of the job, as Slurm signals a preempted or
# cancelled job (and a terminal its foreground): the script's exit status
start() { # SIG N [group]
    n0=$(cat "$TMP/run/log.jsonl" 2>/dev/null | wc -l)
    # shellcheck disable=SC2086
    setsid sh "$R" "$TMP/run" $opts >"$TMP/start.out" 2>"$TMP/start.err" &
    spid=$!
    i=0
    while [ $i -lt 1200 ] && [ "$(cat "$TMP/run/log.jsonl" 2>/dev/null | wc -l)" -lt $((n0 + $2)) ] &&
        kill -0 $spid 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
    if [ "${3:-}" = group ]; then kill -"$1" -- -$spid; else kill -"$1" $spid; fi
    wait $spid
}
start USR1 3
is "$?" "130" "USR1 (the time limit near): sa1b-train stopped with a checkpoint (130)"
s1=$(cat "$TMP/run/latest" 2>/dev/null)
test -n "$s1" && test -s "$TMP/run/model-$s1.safetensors"
ok $? "a checkpoint of step ${s1:-none}"
is "$(cat "$TMP/scontrol.log" 2>/dev/null)" "requeue 4242" "and the job requeued"
start TERM 2 group
is "$?" "130" "TERM to every process of the job (a preemption): stopped with a checkpoint"
s2=$(cat "$TMP/run/latest" 2>/dev/null)
test -n "$s2" && [ "$s2" -gt "${s1:-0}" ]
ok $? "the second start went on from the first one's step ($s1 -> $s2)"
is "$(wc -l <"$TMP/scontrol.log" | tr -d ' ')" "1" "no requeue of its own (Slurm requeues a preempted job)"
is "$(wc -l <"$TMP/run/log.jsonl" | tr -d ' ')" "$s2" "one log record per step over the starts"

# the last start runs to the end; the run equals the one in one go
final=$((s2 + 2))
# shellcheck disable=SC2086
sh "$R" "$TMP/run" $(echo $opts | sed "s/--steps 100000/--steps $final/") >/dev/null 2>&1
is "$?" "0" "the last start ends the run (exit 0)"
# the same steps by --resume: stopped after s1 and s2 (SA1B_TEST_KILL), then
# to the end (only when the starts above stopped where they should: else
# the reference would train its 100000 steps)
d="$TMP/ref"
if [ -n "$s1" ] && [ -n "$s2" ] && [ "$s2" -gt "$s1" ] 2>/dev/null; then
    # shellcheck disable=SC2086
    SA1B_TEST_KILL=step:$s1 sa1b-train $opts --out "$d" >/dev/null 2>&1
    SA1B_TEST_KILL=step:$s2 sa1b-train --resume "$d" -q >/dev/null 2>&1
    sa1b-train --resume "$d" --steps "$final" -q >/dev/null 2>&1
    cmp -s "$d/model-$final.safetensors" "$TMP/run/model-$final.safetensors"
else
    false
fi
ok $? "the run in three starts equals --resume at the same steps, bit for bit"
cksum "$TMP/run"/* >"$TMP/before"
# shellcheck disable=SC2086
sh "$R" "$TMP/run" $(echo $opts | sed "s/--steps 100000/--steps $final/") >/dev/null 2>&1
is "$?" "0" "a start of the finished run ends at once"
cksum "$TMP/run"/* | cmp -s - "$TMP/before"
ok $? "and changes nothing"

# what the script does with the trainer's end, through stand-ins for
# sa1b-train: requeued after USR1 when it stopped with a checkpoint (130) or
# was ended by the signal while starting (143), never after a failure (3)
mkdir -p "$TMP/fake"
for st in 130 143 3; do
    case $st in
        130) body='trap "exit 130" TERM' ;;
        143) body='' ;;                    # (no handler yet: the signal ends it)
        3) body='trap "exit 3" TERM' ;;
    esac
    printf '#!/bin/sh\n%s\necho started >"%s/fake.started"\nwhile :; do sleep 0.05; done\n' "$body" "$TMP" \
        >"$TMP/fake/sa1b-train"
    chmod +x "$TMP/fake/sa1b-train"
    : >"$TMP/scontrol.log"
    rm -f "$TMP/fake.started"
    PATH="$TMP/fake:$PATH" sh "$R" "$TMP/f$st" >/dev/null 2>&1 &
    spid=$!
    i=0
    while [ $i -lt 600 ] && ! [ -e "$TMP/fake.started" ]; do sleep 0.05; i=$((i + 1)); done
    kill -USR1 $spid
    wait $spid
    got=$?
    want=""
    [ "$st" != 3 ] && want="requeue 4242"
    is "$got:$(cat "$TMP/scontrol.log")" "$st:$want" "USR1, the trainer ends with $st: exit $st, ${want:-no requeue}"
done

sh "$R" --help >"$TMP/help" 2>&1
ok $? "--help: exit 0"
grep_ok "^Usage: sbatch contrib/sa1b-train.sbatch OUT" "$TMP/help" "--help gives the usage"
run_status 2 "no OUT: usage error" sh "$R"
if command -v shellcheck >/dev/null; then
    run_ok "shellcheck-clean" shellcheck "$R"
else
    skip 1 "shellcheck missing"
fi
done_testing
