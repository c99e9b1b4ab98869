#!/bin/sh
# t1727: --auto-resume (and --resume) of a finished run says that the run
# is complete, in one line, exit 0, its files untouched (not "resuming DIR,
# step 4 of 4"); a --warmup longer than --steps and --zero 1 in a run of
# one process are taken, each with one line saying what they do there.
. "$top_srcdir/tests/test-lib.sh"
common="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 2 --synthetic-batch 3 --threads 2"
run="$common --steps 4 --warmup 1 --ckpt-every 2"
run_ok "a run of 4 steps" sa1b-train $run -q --out "$TMP/a"
snap() { (cd "$1" && ls -a && cksum ./*) }
snap "$TMP/a" >"$TMP/before"
run_ok "--auto-resume of the finished run" sa1b-train $run --auto-resume --out "$TMP/a"
is "$(cat "$TMP/.err")" "sa1b-train: the run in '$TMP/a' is complete (step 4 of 4): nothing to train (a larger --steps trains it on)" \
    "one line says the run is complete"
snap "$TMP/a" | cmp -s - "$TMP/before"
ok $? "and nothing changed"
run_ok "--resume of it" sa1b-train --resume "$TMP/a"
is "$(cat "$TMP/.err")" "sa1b-train: the run in '$TMP/a' is complete (step 4 of 4): nothing to train (a larger --steps trains it on)" \
    "the same line"
run_ok "with --quiet" sa1b-train --resume "$TMP/a" -q
is "$(cat "$TMP/.err")" "" "nothing"

run_ok "--warmup longer than --steps" sa1b-train $common --steps 4 --warmup 10 --out "$TMP/w" -q
is "$(cat "$TMP/.err")" "sa1b-train: --warmup 10 is longer than --steps 4: the learning rate rises to 40% of --lr by the last step and never decays (give --warmup 4 or less for the whole schedule)" \
    "one line says what the schedule becomes"
is "$(cat "$TMP/w/latest")" "4" "and the run trains"
run_ok "--warmup equal to --steps" sa1b-train $common --steps 4 --warmup 4 --out "$TMP/w4" -q
is "$(cat "$TMP/.err")" "" "says nothing"

run_ok "--zero 1 in one process" sa1b-train $run --zero 1 --out "$TMP/z" -q
is "$(cat "$TMP/.err")" "sa1b-train: --zero 1 splits the optimizer state over the ranks of an mpirun job: a run of one process has nothing to split (it trains as without it)" \
    "one line says it has nothing to split"
cmp -s "$TMP/a/model-4.safetensors" "$TMP/z/model-4.safetensors"
ok $? "and the run is the one without it, bit for bit"
done_testing
