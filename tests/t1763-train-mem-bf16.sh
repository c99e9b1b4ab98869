#!/bin/sh
# t1763: 16-bit storage (--precision bf16/fp16) halves the stored
# activations: every activation and activation gradient is a 16-bit tensor
# (the CPU backend widens an op's operands for that op alone), the
# LayerNorm statistics (fp32) are recomputed in the backward instead of
# stored; the compute weights are 16-bit arrays (parameters <= 1.5 x
# fp32's).  Regression bound (x0.5) on the small
# configuration at micro-batch 8 (the bench-memory row), also with a frozen
# prefix and with checkpointing, from the planner (the training path on the
# meta backend), and the planner's activation peak equals a real CPU run's.
. "$top_srcdir/tests/test-lib.sh"
help=$(sa1b-train --help)
case "$help" in *"--precision"*) ;; *) skip_all "no --precision" ;; esac
acts() { sed -n 's/.*activations=\([0-9]*\).*/\1/p' "$1"; }
params() { sed -n 's/.*parameters=\([0-9]*\).*/\1/p' "$1"; }
cfg="--config small --batch 8 --masks 16 --points 2"
for f in "" "--freeze embed,blocks.0-1" "--checkpoint-every 1" "--checkpoint-decoder"; do
    for p in fp32 bf16 fp16; do
        sa1b-train $cfg $f --precision $p --plan >"$TMP/plan-$p.out" 2>&1
        ok $? "plan: $cfg $f --precision $p"
    done
    a32=$(acts "$TMP/plan-fp32.out") a16=$(acts "$TMP/plan-bf16.out") ah=$(acts "$TMP/plan-fp16.out")
    awk -v a="$a32" -v b="$a16" 'BEGIN { exit !(a > 0 && b > 0 && b <= 0.5 * a) }'
    ok $? "bf16 activations $a16 <= 0.5 x fp32 $a32 ($f)"
    is "$ah" "$a16" "fp16 stores the same bytes as bf16 ($f)"
    # the compute weights: 16-bit arrays beside the fp32 masters
    p32=$(params "$TMP/plan-fp32.out") p16=$(params "$TMP/plan-bf16.out")
    awk -v a="$p32" -v b="$p16" 'BEGIN { exit !(a > 0 && b > a && b <= 1.5 * a) }'
    ok $? "bf16 parameters $p16 <= 1.5 x fp32 $p32 ($f)"
done
# the real CPU backend counts what the planner predicts
cfg="--config small --batch 2 --masks 4 --points 1 --synthetic-batch 1 --threads 2"
sa1b-train $cfg --precision bf16 --steps 2 --ckpt-every 1000 --memory-report -q --out "$TMP/r" >/dev/null 2>"$TMP/r.err"
ok $? "bf16 run"
sa1b-train $cfg --precision bf16 --plan >"$TMP/p.out" 2>&1
ok $? "bf16 plan"
is "$(sed -n 's/^peak bytes: .*activations=\([0-9]*\).*/\1/p' "$TMP/r.err")" "$(acts "$TMP/p.out")" \
    "bf16: measured activation peak = planned"
done_testing
