#!/bin/sh
# t1713: results on standard output (--eval-only's JSON line, --plan's
# table, --dump-step's loss line) that cannot be written are an error: one
# line "standard output: ..." and exit 3, never a silent exit 0.
. "$top_srcdir/tests/test-lib.sh"
[ -w /dev/full ] || skip_all "no /dev/full"
synth="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 1 --threads 2 --synthetic-batch 3"
run_ok "a run" sa1b-train $synth -q --steps 2 --out "$TMP/a"
for what in "--eval-only $TMP/a/model-2.safetensors" "--plan" "--dump-step $TMP/d"; do
    sa1b-train $synth $what >/dev/full 2>"$TMP/err"
    is "$?" "3" "${what%% *} with its output on a full device: exit 3"
    grep_ok "^sa1b-train: standard output: No space left on device$" "$TMP/err" "${what%% *}: the line says so"
done
run_ok "--eval-only to a file" sa1b-train $synth --eval-only "$TMP/a/model-2.safetensors"
grep_ok '"miou"' "$TMP/.out" "writes its line"
done_testing
