#!/bin/sh
# t1707: SIGTERM at any point of a training run leaves no temporary file,
# a checkpoint that latest names and that is complete, and a run that
# --resume continues bit for bit.  SA1B_TEST_KILL=step:N raises SIGTERM
# after step N, save:N between the model and the state file of step N's
# checkpoint: fixed points, no timing.  --export's overlays: temp:N.
. "$top_srcdir/tests/test-lib.sh"
common="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 3 --points 1 --synthetic-batch 5 --threads 2 -q"
run_ok "the run in one go" sa1b-train $common --steps 8 --warmup 2 --ckpt-every 3 --log-every 1 --out "$TMP/whole"
for pt in step:1 step:2 step:3 step:5 step:7 save:3 save:6 step:4 step:6 save:8; do
    d="$TMP/k-$pt"
    SA1B_TEST_KILL=$pt sa1b-train $common --steps 8 --warmup 2 --ckpt-every 3 --log-every 1 --out "$d" \
        >/dev/null 2>"$TMP/err"
    rc=$?
    n=${pt#*:}
    if [ "$pt" = save:8 ]; then want=0; else want=130; fi   # the last checkpoint ends the run anyway
    is "$rc" "$want" "SIGTERM at $pt: exit $want"
    is "$(ls "$d" | grep -E '\.tmp' | tr '\n' ' ')" "" "SIGTERM at $pt: no temporary left"
    step=$(cat "$d/latest")
    is "$step" "$n" "SIGTERM at $pt: latest names step $n"
    test -s "$d/model-$step.safetensors" && test -s "$d/state-$step.bin"
    ok $? "SIGTERM at $pt: its checkpoint is complete"
    if [ "$want" = 130 ]; then
        run_ok "SIGTERM at $pt: --resume" sa1b-train --resume "$d" -q
    fi
    cmp -s "$TMP/whole/model-8.safetensors" "$d/model-8.safetensors"
    ok $? "SIGTERM at $pt: the resumed run ends bit-identical to the one in one go"
done
# a stop inside a checkpoint ends after it without writing that step again:
# a second write replaced the files latest names, and removed them where it
# failed (a full disk; a device that failed as the files read its memory)
if command -v strace >/dev/null && strace -f -qq -o /dev/null -e trace=rename true 2>/dev/null; then
    SA1B_TEST_KILL=save:3 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -o "$TMP/sv.trace" \
        -e trace=rename sa1b-train $common --steps 8 --ckpt-every 3 --out "$TMP/sv" >/dev/null 2>&1
    st=$?
    is "$st:$(grep -c '"[^"]*/model-3\.safetensors") = 0' "$TMP/sv.trace"):$(grep -c '"[^"]*/state-3\.bin") = 0' "$TMP/sv.trace")" \
        "130:1:1" "SIGTERM inside the checkpoint of step 3: its files are written once"
else
    skip 1 "no strace (Debian: strace)"
fi
mkdir "$TMP/ev"
# progress lines to a reader that went away (| tee killed by the same
# Ctrl-C, | head): the write fails, the run goes on and stops with its
# checkpoint (before: SIGPIPE killed it at its next line, exit 141, every
# step since the last checkpoint lost)
noq=$(echo "$common" | sed 's/ -q$//')
{ SA1B_TEST_KILL=step:3 sa1b-train $noq --steps 8 --log-every 1 --ckpt-every 100 --out "$TMP/pipe" 2>&1 >/dev/null
    echo $? >"$TMP/pipe.rc"; } | true
is "$(cat "$TMP/pipe.rc")" "130" "SIGTERM with standard error a closed pipe: exit 130"
is "$(cat "$TMP/pipe/latest" 2>/dev/null)" "3" "with the checkpoint of step 3"
SA1B_TEST_KILL=temp:2 sa1b-train --eval-only "$TMP/whole/model-8.safetensors" --synthetic-batch 5 --batch 2 --masks 3 \
    --export 4 --out "$TMP/ev" -q >/dev/null 2>&1
is "$?:$(ls "$TMP/ev/export" | grep -c '^00000-iou[0-9]*\.png$'):$(ls "$TMP/ev/export" | grep -c tmp)" "143:1:0" \
    "SIGTERM while --export writes its second overlay: the first stays, no temporary"
# a stop in the last step, or in the evaluation of --val after the training
# (val:N), ends the run without that evaluation, exit 130 and one line; before,
# the signal was kept for a step that never came: the evaluation ran to its
# end (hours on a large --val) and the run exited 0
if command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null &&
    sa1b-synth -n 4 -W 160 -H 120 -m 6 -s 2 -o "$TMP/val.tar" --quiet &&
    sa1b-shard --image-size 128 --mask-size 32 -o "$TMP/val.shard" "$TMP/val.tar" >/dev/null 2>&1; then
    for pt in step:4 val:4; do
        SA1B_TEST_KILL=$pt sa1b-train $common --steps 4 --ckpt-every 2 --val "$TMP/val.shard" --out "$TMP/v-$pt" \
            >"$TMP/v.out" 2>"$TMP/v.err"
        is "$?" "130" "SIGTERM at $pt with --val: exit 130"
        is "$(cat "$TMP/v.err")" "sa1b-train: interrupted after the training (--val not evaluated): checkpoint of step 4 written" \
            "SIGTERM at $pt with --val: one line"
        is "$(cat "$TMP/v.out")" "" "SIGTERM at $pt with --val: no evaluation"
        is "$(cat "$TMP/v-$pt/latest")" "4" "SIGTERM at $pt with --val: the last checkpoint is written"
    done
    # once the evaluation's line is printed (evaluated:N), a signal loses
    # nothing: the run ends as it would have, that line kept (was exit 130,
    # "--val not evaluated", the line lost in stdout's buffer by _exit)
    SA1B_TEST_KILL=evaluated:4 sa1b-train $common --steps 4 --ckpt-every 2 --val "$TMP/val.shard" \
        --out "$TMP/v-done" >"$TMP/v.out" 2>"$TMP/v.err"
    is "$?:$(cat "$TMP/v.err")" "0:" "SIGTERM once --val is evaluated: exit 0, no line"
    grep_ok '^[{]"miou": [0-9.]*, "masks": [1-9][0-9]*, ' "$TMP/v.out" "SIGTERM once --val is evaluated: its line kept"
else
    skip 10 "sa1b-synth or sa1b-shard not built"
fi
done_testing
