#!/bin/sh
# t1700: the debug dump of sa1b-train against the independent PyTorch
# implementation of MODEL.md (tests/reference/sam_ref.py): loss to 1e-5 and
# every gradient to 1e-4 relative.  Skips when python3-torch is missing.
. "$top_srcdir/tests/test-lib.sh"
PY=/usr/bin/python3
[ -x $PY ] || skip_all "no /usr/bin/python3"
$PY -c 'import torch, numpy' 2>/dev/null || skip_all "python3-torch not installed"

# tiny config, B=2, M=3, K=2: padding points, negative points, an invalid pair
run_ok "dump of one step (tiny, synthetic batch)" \
    sa1b-train --config tiny --batch 2 --masks 3 --points 2 --synthetic-batch 5 --seed 3 \
    --threads 2 --dump-step "$TMP/dump.safetensors"
grep_ok '"valid": [1-5]' "$TMP/.out" "some pairs valid, not all"
$PY "$SRC/tests/reference/sam_ref.py" --threads 2 "$TMP/dump.safetensors" >"$TMP/ref.out" 2>&1
ok $? "PyTorch reference agrees on loss, outputs and every gradient"
sed 's/^/# /' "$TMP/ref.out"

# a second geometry: more points, one decoder layer, L=1
run_ok "dump with K=3, D=1, L=1" \
    sa1b-train --config tiny --dec-depth 1 --enc-depth 1 --batch 1 --masks 2 --points 3 \
    --synthetic-batch 9 --seed 4 --dump-step "$TMP/dump2.safetensors"
$PY "$SRC/tests/reference/sam_ref.py" --threads 2 "$TMP/dump2.safetensors" >"$TMP/ref2.out" 2>&1
ok $? "PyTorch reference agrees (second geometry)"
sed 's/^/# /' "$TMP/ref2.out"

# the result does not depend on the thread count
run_ok "dump with 1 thread" \
    sa1b-train --config tiny --batch 2 --masks 3 --points 2 --synthetic-batch 5 --seed 3 \
    --threads 1 --dump-step "$TMP/dump1.safetensors"
cmp -s "$TMP/dump.safetensors" "$TMP/dump1.safetensors"
ok $? "1 and 2 threads give bit-identical dumps"
done_testing
