#!/bin/sh
# t1761: sa1b-train --plan (the training path on the counting meta backend)
# predicts the peak memory that a real CPU run of the same configuration
# measures (--memory-report), within 3%, over several configurations; the
# budget search finds a micro-batch that fits and one more that does not.
. "$top_srcdir/tests/test-lib.sh"
base="--synthetic-batch 1 --threads 2 --points 2"
help=$(sa1b-train --help)
has() { case "$help" in *"$1"*) return 0 ;; esac; return 1; }
set -- "--config tiny --batch 1 --masks 2" \
       "--config tiny --batch 3 --masks 5" \
       "--config tiny --batch 2 --masks 4 --optim adamw8bit" \
       "--config tiny --batch 2 --masks 4 --enc-depth 3 --dec-depth 1" \
       "--config small --batch 1 --masks 2"
has "--checkpoint-every" && set -- "$@" "--config tiny --batch 2 --masks 4 --checkpoint-every 1"
has "--checkpoint-decoder" && set -- "$@" "--config tiny --batch 2 --masks 4 --checkpoint-every 1 --checkpoint-decoder"
has "--precision" && set -- "$@" "--config tiny --batch 2 --masks 4 --precision bf16" "--config tiny --batch 2 --masks 4 --precision fp16"
has "--accum" && set -- "$@" "--config tiny --batch 2 --masks 4 --accum 2"
has "--freeze" && set -- "$@" "--config tiny --batch 2 --masks 4 --freeze encoder"
i=0
for cfg in "$@"; do
    i=$((i + 1))
    sa1b-train $base $cfg --steps 3 --ckpt-every 1000 --memory-report -q --out "$TMP/r$i" >"$TMP/m$i.out" 2>"$TMP/m$i.err"
    ok $? "measure: $cfg"
    sa1b-train $base $cfg --plan >"$TMP/p$i.out" 2>"$TMP/p$i.err"
    ok $? "plan: $cfg"
    ma=$(sed -n 's/^peak allocated \([0-9]*\) bytes, peak reserved \([0-9]*\) bytes.*/\1/p' "$TMP/m$i.err")
    mr=$(sed -n 's/^peak allocated \([0-9]*\) bytes, peak reserved \([0-9]*\) bytes.*/\2/p' "$TMP/m$i.err")
    pa=$(sed -n 's/^predicted: peak_allocated=\([0-9]*\) peak_reserved=\([0-9]*\).*/\1/p' "$TMP/p$i.out")
    pr=$(sed -n 's/^predicted: peak_allocated=\([0-9]*\) peak_reserved=\([0-9]*\).*/\2/p' "$TMP/p$i.out")
    awk -v m="$ma" -v p="$pa" -v r="$mr" -v q="$pr" 'BEGIN {
        if (m == "" || p == "" || m <= 0) exit 1
        ea = (p - m) / m; er = (q - r) / r; if (ea < 0) ea = -ea; if (er < 0) er = -er
        exit !(ea <= 0.03 && er <= 0.03) }'
    ok $? "prediction within 3%: $cfg (allocated measured $ma predicted $pa; reserved $mr / $pr)"
done

# budget: the largest micro-batch that fits, and one more does not
cfg="--config tiny --masks 4"
run_ok "--plan --memory-budget 24M" sa1b-train $base $cfg --batch 2 --plan --memory-budget 24M --effective-batch 8
best=$(awk '$1 == "fp32" && $2 == "off" {print $3}' "$TMP/.out")
test -n "$best" && test "$best" -ge 1
ok $? "a micro-batch fits 24M ($best)"
sa1b-train $base $cfg --batch "$best" --plan >"$TMP/b1.out"
sa1b-train $base $cfg --batch $((best + 1)) --plan >"$TMP/b2.out"
r1=$(sed -n 's/^predicted: .*peak_reserved=\([0-9]*\).*/\1/p' "$TMP/b1.out")
r2=$(sed -n 's/^predicted: .*peak_reserved=\([0-9]*\).*/\1/p' "$TMP/b2.out")
test "$r1" -le $((24 * 1048576)) && test "$r2" -gt $((24 * 1048576))
ok $? "B=$best fits ($r1 bytes), B=$((best + 1)) does not ($r2)"
grep_ok '^bf16 ' "$TMP/.out" "the table lists bf16"
run_status 2 "--memory-budget without --plan" sa1b-train $base $cfg --memory-budget 1G --out "$TMP/x"
run_status 2 "--memory-budget auto without --plan" sa1b-train $base $cfg --memory-budget auto --out "$TMP/x"

# auto: the memory the backend could take now, printed first; the CPU's is
# the host's available memory (within an address-space limit's room: not
# under AddressSanitizer, which maps terabytes of shadow)
run_ok "--plan --memory-budget auto" sa1b-train $base $cfg --batch 2 --plan --memory-budget auto
grep_ok '^memory budget: auto, [0-9.]+[KMGT]? \(the host.s available memory|the address-space limit.s room\)$' "$TMP/.out" \
    "the budget and where it comes from, first"
grep_ok '^fp32 +off +[0-9]+ ' "$TMP/.out" "a table for that budget"
if ! grep -q __asan_init "$BUILD/trainer/sa1b-train" 2>/dev/null; then
    (ulimit -v 1500000 && exec sa1b-train $base $cfg --batch 2 --plan --memory-budget auto) >"$TMP/au.out" 2>&1
    head -1 "$TMP/au.out" | grep -Eq '^memory budget: auto, [0-9.]+[KMG] \(the address-space limit.s room\)$'
    ok $? "under ulimit -v 1500000: the limit's room ($(head -1 "$TMP/au.out"))"
else
    skip 1 "ulimit -v: not under AddressSanitizer"
fi
# cuda: the device's free memory, or one line without a device
sa1b-train $base $cfg --batch 2 --plan --memory-budget auto --backend cuda >"$TMP/ac.out" 2>"$TMP/ac.err"
rc=$?
{ [ $rc -eq 0 ] && grep -q "^memory budget: auto, .* (the device's free memory less 256 MiB taken outside the allocator)$" "$TMP/ac.out"; } ||
    { [ $rc -eq 3 ] && [ "$(wc -l <"$TMP/ac.err")" -eq 1 ] &&
        grep -Eq '^sa1b-train: --memory-budget auto --backend cuda: (no CUDA device|cuda backend not available)' "$TMP/ac.err"; }
ok $? "--backend cuda: the device's free memory, or one line without one (exit $rc: $(cat "$TMP/ac.err"))"
run_status 2 "bad --memory-budget" sa1b-train $base $cfg --plan --memory-budget 12Q
run_status 2 "--plan with --eval-only" sa1b-train $base $cfg --plan --eval-only x.safetensors

# the base preset (SAM ViT-B's encoder): planned, never run here.  Its
# parameters: the encoder's 12 blocks of 12 E^2 + 13 E weights and biases,
# patch embedding, positions, neck, and the decoder (MODEL.md's table).
run_ok "--config base --plan" sa1b-train --config base --batch 1 --masks 16 --synthetic-batch 1 --plan
np=$(sed -n 's/^predicted: .* parameters=\([0-9]*\).*/\1/p' "$TMP/.out")
E=768; G=64; C=256
enc=$((12 * (12 * E * E + 13 * E) + 3 * 16 * 16 * E + E + G * G * E + E * C + 2 * C))
test -n "$np" && test $((np / 4)) -gt "$enc" && test $((np / 4)) -lt $((enc + 5000000))
ok $? "base: $((${np:-0} / 4)) parameters, the ViT-B encoder's $enc and a decoder of a few million"
# the CUDA backend's sizes (plain C, every build): a fused attention keeps
# two elements per query row, not Tq x Tk, so its activations grow with the
# tokens, the CPU's with their square (its probabilities)
acts_of() { sed -n 's/^predicted: .* activations=\([0-9]*\).*/\1/p' "$1"; }
for be in cpu cuda; do
    for S in 512 1024; do
        sa1b-train --config base --image-size $S --batch 1 --masks 4 --precision bf16 --synthetic-batch 1 \
            --plan --backend $be >"$TMP/$be$S.out" 2>&1
    done
done
c5=$(acts_of "$TMP/cpu512.out") c10=$(acts_of "$TMP/cpu1024.out")
g5=$(acts_of "$TMP/cuda512.out") g10=$(acts_of "$TMP/cuda1024.out")
test -n "$g5" && test -n "$g10" && test $((g10 * 10)) -lt $((g5 * 45)) && test $((c10 * 10)) -gt $((c5 * 80))
ok $? "--plan --backend cuda: activations x$(awk -v a="${g10:-0}" -v b="${g5:-1}" 'BEGIN {printf "%.1f", a / b}') from S=512 to 1024 (linear in tokens), the CPU's x$(awk -v a="${c10:-0}" -v b="${c5:-1}" 'BEGIN {printf "%.1f", a / b}')"
run_status 2 "--plan --backend: an unknown one" sa1b-train $base $cfg --plan --backend tpu

# the loader's batches: in the memory the CPU computes in (workers + 2 in
# flight), in pinned host memory for a GPU, whose device holds the one copy
# a step reads (before: the GPU's plan counted them all as device memory)
if command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null &&
    sa1b-synth -n 4 -W 240 -H 160 -m 6 -o "$TMP/t.tar" --quiet &&
    sa1b-shard -q --image-size 64 --mask-size 16 -o "$TMP/t.shard" "$TMP/t.tar"; then
    data_of() { sa1b-train --plan --config small --image-size 64 --batch 4 --masks 16 "$@" 2>&1 | sed -n 's/.* data=\([0-9]*\).*/\1/p'; }
    one=$(data_of --backend cuda --data "$TMP/t.shard")
    test "${one:-0}" -gt 0
    ok $? "--plan --backend cuda --data: one batch on the device ($one bytes)"
    # the synthetic source holds two: the next is made while a step runs
    is "$(data_of --backend cpu --synthetic-batch 3)" "$((2 * ${one:-0}))" "--plan --backend cpu --synthetic-batch: two batches"
    is "$(data_of --backend cpu --synthetic-batch 3 --ranks 4)" "$((6 * ${one:-0}))" \
        "--plan --ranks 4 --synthetic-batch: and the global batch of 4 ranks"
    cpu=$(data_of --backend cpu --data "$TMP/t.shard")
    test -n "$one" && test "${cpu:-0}" -gt "$((2 * one))"
    ok $? "--plan --backend cpu --data: the loader's batches in flight ($cpu bytes, one is $one)"
else
    skip 2 "sa1b-synth or sa1b-shard not built"
fi
done_testing
