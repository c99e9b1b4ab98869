#!/bin/sh
# t1765: the planner's peak of a run with stages (--unfreeze, --stage-batch)
# is the run's: --plan's peak_reserved equals --memory-report's peak
# reserved bytes exactly, each unfreezing's new optimizer state beside the
# old (AdamW and AdamW8bit's codes and block scales), the gradients and
# activations of the groups it trains, each --stage-batch's micro-batch and
# the loader's buffers of --data as it allocates them included.  Under
# --memory-limit at that figure the run trains to its end; one byte below
# it fails in one line whose advice (a --batch, with a --stage-batch where
# a stage's micro-batch is what does not fit) then trains under the same
# limit.  Before: the plan trained the groups
# --unfreeze unfreezes from the start (535370240 bytes for the run
# below, which reserved 550050304), ignored --stage-batch, counted the
# loader's arrays one allocation each (18K short with shards), and the
# advice named the micro-batch that had just failed.
. "$top_srcdir/tests/test-lib.sh"
t64="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --masks 4 --points 1 --synthetic-batch 1 --threads 2"
tny="--config tiny --masks 4 --points 2 --synthetic-batch 1 --threads 2"
# the run; t1764's --unfreeze and --stage-batch runs; t1750's run
# with every feature; a stage to a smaller micro-batch with an unfreezing;
# AdamW8bit over three unfreezings, the last after a long stretch; the
# cache emptied every 3 steps
set -- "--config small --synthetic-batch 1 --threads 2 --steps 6 --batch 4 --masks 8 --freeze encoder --unfreeze 2:blocks.4-5,4:all" \
       "--config small --synthetic-batch 1 --threads 2 --steps 6 --batch 4 --masks 8 --freeze encoder --unfreeze 2:blocks.4-5,4:all --optim adamw8bit" \
       "$t64 --batch 2 --freeze encoder --unfreeze 6:all --steps 8" \
       "$t64 --batch 2 --accum 2 --stage-batch 6:4 --steps 8" \
       "--config tiny --batch 2 --masks 3 --points 2 --synthetic-batch 5 --seed 3 --threads 2 --steps 8 --precision fp16 --loss-scale-window 3 --accum 2 --checkpoint-every 1 --checkpoint-decoder --freeze encoder --unfreeze 3:neck,5:all --stage-batch 3:1,5:4" \
       "$tny --batch 4 --freeze encoder --unfreeze 3:all --stage-batch 3:2 --steps 7" \
       "$tny --batch 2 --freeze encoder --unfreeze 1:blocks.0,2:blocks.1,8:all --steps 11 --optim adamw8bit" \
       "$tny --batch 2 --freeze encoder --unfreeze 4:blocks.1,10:all --steps 14 --empty-cache-every 3"
# with shards (the loader's buffers, one block each, and its threads)
if command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null &&
    sa1b-synth -n 16 -W 240 -H 160 -m 6 -o "$TMP/t.tar" --quiet &&
    sa1b-shard -q --image-size 128 --mask-size 32 -o "$TMP/t.shard" "$TMP/t.tar"; then
    d="--config tiny --image-size 128 --data $TMP/t.shard --threads 2 --masks 4"
    set -- "$@" "$d --batch 2 --steps 6" "$d --batch 2 --loader-threads 3 --freeze encoder --unfreeze 2:all --steps 6" \
        "$d --batch 4 --freeze encoder --unfreeze 2:blocks.0,3:all --stage-batch 3:2 --steps 12 --optim adamw8bit" \
        "--config small --image-size 128 --data $TMP/t.shard --threads 2 --batch 4 --masks 8 --freeze encoder --unfreeze 2:blocks.4-5,4:all --steps 6"
else
    skip 28 "sa1b-synth or sa1b-shard not built"
fi
peak_of() { sed -n 's/^predicted: .*peak_reserved=\([0-9]*\).*/\1/p' "$1"; }
i=0
for cfg in "$@"; do
    i=$((i + 1))
    sa1b-train $cfg --plan >"$TMP/p$i.out" 2>"$TMP/p$i.err"
    ok $? "plan: $cfg"
    sa1b-train $cfg -q --ckpt-every 1000 --memory-report --out "$TMP/m$i" 2>"$TMP/m$i.err"
    ok $? "measure: $cfg"
    p=$(peak_of "$TMP/p$i.out")
    m=$(sed -n 's/^peak allocated [0-9]* bytes, peak reserved \([0-9]*\) bytes.*/\1/p' "$TMP/m$i.err")
    test -n "$p" && test "$p" = "$m"
    ok $? "the plan's peak is the run's: ${p:-none} predicted, ${m:-none} reserved ($cfg)"

    # at the plan's figure the run trains; one byte below it does not, and
    # its advice then trains under that limit
    run_ok "under --memory-limit ${p:-0} (the plan's figure): trains" \
        sa1b-train $cfg -q --ckpt-every 1000 --out "$TMP/a$i" --memory-limit "${p:-0}"
    run_status 3 "one byte below: exit 3" \
        sa1b-train $cfg -q --ckpt-every 1000 --out "$TMP/b$i" --memory-limit $((${p:-1} - 1))
    line=$(grep -E 'out of memory' "$TMP/.err" | head -1)
    b=$(echo "$line" | sed -n 's/.* the planner.s largest micro-batch for .* is --batch \([0-9]*\).*/\1/p')
    sb=$(echo "$line" | sed -n 's/.* is --batch [0-9]* with --stage-batch \([0-9:,]*\) .*/\1/p')
    test -n "$b"
    ok $? "the advice names a micro-batch: --batch ${b:-none}${sb:+ --stage-batch $sb} ($line)"
    run_ok "which trains under the same limit" \
        sa1b-train $cfg ${b:+--batch $b} ${sb:+--stage-batch $sb} -q --ckpt-every 1000 --out "$TMP/c$i" \
        --memory-limit $((${p:-1} - 1))
done

# the plan's own table: the micro-batch it finds for a budget trains with
# the stages under that budget
cfg="--config small --synthetic-batch 1 --threads 2 --steps 6 --masks 8 --freeze encoder --unfreeze 2:blocks.4-5,4:all"
run_ok "--plan --memory-budget 520M" sa1b-train $cfg --batch 4 --plan --memory-budget 520M
best=$(sed -n 's/^max_batch: \([0-9]*\) .*/\1/p' "$TMP/.out")
run_ok "its max_batch ${best:-none} trains under --memory-limit 520M" \
    sa1b-train $cfg --batch "${best:-0}" -q --ckpt-every 1000 --out "$TMP/t" --memory-limit 520M
done_testing
