#!/bin/sh
# t1780: sa1b-train --attention (the CUDA attention's path): its names, the
# messages of a bad one (the option's, SA1B_CUDA_ATTN's), no effect on the
# CPU (the same bits), the run record (restored on resume when not given,
# taken when given, over SA1B_CUDA_ATTN), the option over the variable.
. "$top_srcdir/tests/test-lib.sh"
common="--config tiny --batch 1 --masks 2 --steps 2 --ckpt-every 2 --synthetic-batch 3 -q"
rec() { grep -a -o '"run.attention":"[a-z]*"' "$1" | head -1 | sed 's/.*:"\(.*\)"/\1/'; }

run_status 2 "--attention bogus" sa1b-train --attention bogus --out "$TMP/x" --synthetic-batch 1
is "$(cat "$TMP/.err" | head -1)" "sa1b-train: --attention: 'bogus' is not auto, cudnn, flash, blocked or fused" \
    "one line naming the option and the choices"
run_status 2 "--attention without its value" sa1b-train --out "$TMP/x" --synthetic-batch 1 --attention
test ! -e "$TMP/x"
ok $? "nothing written"
SA1B_CUDA_ATTN=nope run_status 2 "SA1B_CUDA_ATTN=nope" sa1b-train --out "$TMP/x" --synthetic-batch 1
grep_ok "^sa1b-train: SA1B_CUDA_ATTN: 'nope' is not auto, cudnn, flash, blocked or fused .it stands for --attention.$" \
    "$TMP/.err" "the variable's line names it"
SA1B_CUDA_ATTN=nope run_ok "a valid --attention wins over a bad SA1B_CUDA_ATTN" sa1b-train $common --attention fused \
    --out "$TMP/o1"

# no effect on the CPU: every name trains the same bits as the default
run_ok "the default" sa1b-train $common --out "$TMP/def"
is "$(rec "$TMP/def/state-2.bin")" "auto" "the record keeps the default, auto"
for p in auto cudnn flash blocked fused; do
    run_ok "--attention $p on the CPU" sa1b-train $common --attention $p --out "$TMP/$p"
    cmp -s "$TMP/def/model-2.safetensors" "$TMP/$p/model-2.safetensors"
    ok $? "--attention $p: the CPU's weights are the default's bits"
    is "$(rec "$TMP/$p/state-2.bin")" "$p" "the record keeps --attention $p"
done
SA1B_CUDA_ATTN=blocked run_ok "SA1B_CUDA_ATTN=blocked" sa1b-train $common --out "$TMP/env"
is "$(rec "$TMP/env/state-2.bin")" "blocked" "the variable stands for the option (recorded as it)"
SA1B_CUDA_ATTN=blocked run_ok "both" sa1b-train $common --attention flash --out "$TMP/both"
is "$(rec "$TMP/both/state-2.bin")" "flash" "the option wins over the variable"

# resume: restored when not given (over the variable), taken when given
run_ok "resume without --attention" sa1b-train --resume "$TMP/flash" --steps 3 --ckpt-every 1 -q
is "$(rec "$TMP/flash/state-3.bin")" "flash" "the run's --attention flash restored"
SA1B_CUDA_ATTN=fused run_ok "resume with SA1B_CUDA_ATTN=fused" sa1b-train --resume "$TMP/flash" --steps 4 --ckpt-every 1 -q
is "$(rec "$TMP/flash/state-4.bin")" "flash" "the record's path over the variable's"
run_ok "resume with --attention blocked" sa1b-train --resume "$TMP/flash" --steps 5 --ckpt-every 1 -q --attention blocked
is "$(rec "$TMP/flash/state-5.bin")" "blocked" "a given --attention is taken (not a setting the run is refused over)"
done_testing
