#!/bin/sh
# t1711: --overwrite never removes the checkpoint that --init starts from:
# an --init file that is one of the run's files in --out (compared by
# device and inode, whatever the path says) is refused in one line, exit 2,
# before anything in the folder is removed; a start that fails later (the
# optimizer out of memory) removes nothing either.
. "$top_srcdir/tests/test-lib.sh"
common="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 1 --synthetic-batch 5 --threads 2 -q"
run_ok "a run" sa1b-train $common --steps 4 --ckpt-every 2 --out "$TMP/a"
files=$(ls "$TMP/a" | tr '\n' ' ')
run_status 2 "--init OUT/model-4 --overwrite --out OUT is refused" \
    sa1b-train $common --steps 2 --init "$TMP/a/model-4.safetensors" --overwrite --out "$TMP/a"
grep_ok "^sa1b-train: --init '$TMP/a/model-4.safetensors' is model-4.safetensors of the run in '$TMP/a', which --overwrite removes" \
    "$TMP/.err" "the line names the file and the folder"
is "$(wc -l <"$TMP/.err" | tr -d ' ')" "1" "in one line"
is "$(ls "$TMP/a" | tr '\n' ' ')" "$files" "nothing is removed"
ln -s "$TMP/a/model-2.safetensors" "$TMP/link"
run_status 2 "the same through a symbolic link and another path" \
    sa1b-train $common --steps 2 --init "$TMP/link" --overwrite --out "$TMP/a/../a"
is "$(ls "$TMP/a" | tr '\n' ' ')" "$files" "nothing is removed"
# a start that fails after the checks (the optimizer's memory) removes
# nothing either: the removal comes last
run_status 3 "--overwrite whose optimizer does not fit under --memory-limit: exit 3" \
    sa1b-train $common --steps 2 --overwrite --memory-limit 7M --out "$TMP/a"
grep_ok "^sa1b-train: out of memory for the optimizer" "$TMP/.err" "says so"
is "$(ls "$TMP/a" | tr '\n' ' ')" "$files" "nothing is removed"
cp "$TMP/a/model-4.safetensors" "$TMP/w.safetensors"
run_ok "a copy outside the folder starts the new run" \
    sa1b-train $common --steps 2 --init "$TMP/w.safetensors" --overwrite --out "$TMP/a"
is "$(ls "$TMP/a" | tr '\n' ' ')" "latest log.jsonl model-2.safetensors state-2.bin " "the folder holds the new run"
done_testing
