#!/bin/sh
# t1760: the caching allocator in a real run of sa1b-train: over 50 steps of
# the tiny configuration on synthetic batches the allocated bytes after
# every step equal those after step 2 (no leak) and no step after the first
# asks the system for memory; --empty-cache-every gives blocks back (and
# they come back from the system) without changing the training; the
# memory line and --memory-report.
. "$top_srcdir/tests/test-lib.sh"
common="--config tiny --enc-depth 1 --dec-depth 1 --batch 1 --masks 3 --points 2 --synthetic-batch 3 --threads 2"
field() { sed "s/.*\"$1\": \([0-9.e+-]*\)[,}].*/\1/" "$2"; }
run_ok "train 50 steps" sa1b-train $common --steps 50 --log-every 1 --ckpt-every 1000 --memory-report --out "$TMP/a"
is "$(field mem_allocated "$TMP/a/log.jsonl" | sed -n '2,$p' | sort -u | wc -l | tr -d ' ')" "1" \
    "allocated bytes after steps 2..50 are all equal ($(field mem_allocated "$TMP/a/log.jsonl" | sed -n 2p))"
is "$(field mem_sys_allocs "$TMP/a/log.jsonl" | sort -u | wc -l | tr -d ' ')" "1" \
    "system allocations stop after step 1 ($(field mem_sys_allocs "$TMP/a/log.jsonl" | sed -n 1p) blocks)"
grep_ok '^step 1/50 .*memory: [0-9.]+[KMG] allocated \| [0-9.]+[KMG] reserved \| peak [0-9.]+[KMG]$' "$TMP/.err" \
    "progress line: memory: X allocated | Y reserved | peak Z"
grep_ok '^sa1b-train: training in .*, memory: [0-9.]+[KMG] allocated \| [0-9.]+[KMG] reserved \| peak [0-9.]+[KMG]$' \
    "$TMP/.err" "memory line at start (in the startup line, once the model is set up)"
grep_ok '^activations +[0-9.]+[KMG] +[0-9.]+[KMG] +[0-9.]+[KMG]$' "$TMP/.err" "--memory-report: a row per category"
grep_ok '^peak allocated [0-9]+ bytes, peak reserved [0-9]+ bytes' "$TMP/.err" "--memory-report: exact peaks"

run_ok "train 50 steps, --empty-cache-every 10" sa1b-train $common --steps 50 --log-every 1 --ckpt-every 1000 \
    --empty-cache-every 10 -q --out "$TMP/b"
s10=$(field mem_sys_allocs "$TMP/b/log.jsonl" | sed -n 10p)
s11=$(field mem_sys_allocs "$TMP/b/log.jsonl" | sed -n 11p)
s12=$(field mem_sys_allocs "$TMP/b/log.jsonl" | sed -n 12p)
test "$s11" -gt "$s10" && test "$s12" -eq "$s11"
ok $? "after emptying the cache the next step reallocates, then none ($s10, $s11, $s12)"
is "$(field mem_allocated "$TMP/b/log.jsonl" | sed -n '2,$p' | sort -u | wc -l | tr -d ' ')" "1" \
    "allocated bytes unchanged by emptying the cache"
field loss "$TMP/a/log.jsonl" >"$TMP/a.loss"
field loss "$TMP/b/log.jsonl" >"$TMP/b.loss"
cmp -s "$TMP/a.loss" "$TMP/b.loss"
ok $? "same losses with and without emptying the cache"
# the same with every memory feature of this build on
all=
for f in "--checkpoint-every 1" "--checkpoint-decoder" "--precision bf16" "--accum 2" "--freeze encoder" "--optim adamw8bit"; do
    sa1b-train --help | grep -q -- "${f%% *} " && all="$all $f"
done
run_ok "train 20 steps with$all" sa1b-train $common --steps 20 --log-every 1 --ckpt-every 1000 $all -q --out "$TMP/d"
is "$(field mem_allocated "$TMP/d/log.jsonl" | sed -n '2,$p' | sort -u | wc -l | tr -d ' ')" "1" \
    "every feature: allocated bytes after steps 2..20 all equal"
is "$(field mem_sys_allocs "$TMP/d/log.jsonl" | sed -n '2,$p' | sort -u | wc -l | tr -d ' ')" "1" \
    "every feature: no system allocation after step 2 ($(field mem_sys_allocs "$TMP/d/log.jsonl" | sed -n 2p) blocks)"
run_status 2 "--empty-cache-every 0" sa1b-train $common --steps 1 --empty-cache-every 0 --out "$TMP/c"
done_testing
