#!/bin/sh
# t1773: SA1B_CUDA_PROFILE=FILE, the CUDA backend's measuring aid
# (trainer/backend/cuda/backend_cuda_prof.cu): a run writes FILE when it ends, a table
# of the device time by call site, the costliest first, whose rows sum to
# the total its header gives; GEMMs are named by shape.  A run without the
# variable writes none; one whose FILE cannot be written still trains.
# Skips (77), saying why, without a device.
. "$top_srcdir/tests/test-lib.sh"
args="--backend cuda --config tiny --batch 2 --masks 3 --points 2 --synthetic-batch 5 --threads 1 -q --steps 2
      --log-every 1 --ckpt-every 1000"
SA1B_CUDA_PROFILE="$TMP/prof.tsv" sa1b-train $args --out "$TMP/a" >"$TMP/a.log" 2>&1 || {
    grep -q "no CUDA device\|cuda backend not available in this build" "$TMP/a.log" &&
        skip_all "no CUDA backend: $(head -1 "$TMP/a.log")"
    sed 's/^/# /' "$TMP/a.log"
    ok 1 "sa1b-train --backend cuda with SA1B_CUDA_PROFILE"
    done_testing
}
ok 0 "sa1b-train --backend cuda with SA1B_CUDA_PROFILE"
sed 's/^/# /' "$TMP/prof.tsv" | head -12
grep_ok '^# SA1B_CUDA_PROFILE: [0-9.]* ms between the first event and the last' "$TMP/prof.tsv" "the table's header"
grep_ok '^ms	share	calls	us_per_call	first_us	max_us	site	what$' "$TMP/prof.tsv" "its columns"
rows=$(awk -F'\t' 'NR > 2' "$TMP/prof.tsv" | wc -l)
ok $([ "$rows" -ge 10 ]; echo $?) "one row per call site ($rows)"
# the rows: costliest first, calls > 0, first call <= longest <= all calls,
# the sum the header's total
awk -F'\t' 'NR == 1 { split($0, w, " "); total = w[3] }
    NR > 2 { if (NR > 3 && $1 > prev + 1e-9) bad = "not sorted at row " NR; if ($3 < 1) bad = "no calls at row " NR
             if ($7 !~ /^backend_cuda[a-z_]*\.cu:[0-9]+$/ && $7 != "-") bad = "site " $7
             if ($5 > $6 + 0.05 || $6 > 1000 * $1 + 0.05) bad = "first/max at row " NR; prev = $1; sum += $1 }
    END { if (bad == "" && (sum - total > 0.01 * total + 0.01 || total - sum > 0.01 * total + 0.01))
              bad = "rows sum to " sum " of " total
          print bad }' "$TMP/prof.tsv" >"$TMP/check"
is "$(cat "$TMP/check")" "" "the rows: sorted, each called, first <= max <= sum, summing to the total"
grep_ok '	gemm [0-9]*x[0-9]*x[0-9]* x1$' "$TMP/prof.tsv" "GEMMs named by shape"
grep_ok '	k_[a-z0-9_]*$' "$TMP/prof.tsv" "kernels named"

sa1b-train $args --out "$TMP/b" >"$TMP/b.log" 2>&1
ok $? "without the variable"
is "$(ls "$TMP" | grep -c '\.tsv$')" "1" "no table written"
SA1B_CUDA_PROFILE="$TMP/no/such/dir/p.tsv" sa1b-train $args --out "$TMP/c" >"$TMP/c.log" 2>&1
ok $? "a table that cannot be written: the run still trains"
done_testing
