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
done_testing
