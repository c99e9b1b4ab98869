#!/bin/sh
# t0004: what of scripts/gpu-check runs without a GPU: its usage, the
# autotools checksum that guards the carried .gpu/autotools.tar, the dump
# comparison of `verify` (tests/bench/gpu_dumpcmp.py: identical dumps pass,
# one gradient off by 1e-3 or other inputs fail; its 16-bit rule --ref: a
# gradient 20% off fails, bf16 held to fp16's distance from fp32 fails, fp16
# to bf16's passes) and the PyTorch peer of
# `bench` (tests/bench/gpu_torch.py) on the CPU; verify without a device;
# verify, bench and attn through on the CPU backend (GPU_CHECK_SELFTEST=cpu),
# so that a change of sa1b-train's output that the script parses fails here,
# not in a GPU session; attn's cases each in a process (a planted crash of
# one loses only it), its deadline.  What needs a device runs only on a GPU machine.
. "$top_srcdir/tests/test-lib.sh"
GC="$SRC/scripts/gpu-check"

run_status 2 "no command" sh "$GC"
run_status 2 "unknown command" sh "$GC" frobnicate "$TMP/o"
run_status 2 "build without OUTDIR" sh "$GC" build
run_ok "--help" sh "$GC" --help
grep_ok 'carry=\[".gpu"\]' "$TMP/.out" "--help names the carry of the run calls"
grep_ok 'gpu-check attn \$G/attn' "$TMP/.out" "--help gives the call: attn"
grep_ok 'gpu-check verify \$G/verify' "$TMP/.out" "and verify"
run_ok "autotools-sum" sh "$GC" autotools-sum
s1=$(cat "$TMP/.out")
s2=$(sh "$GC" autotools-sum)
echo "$s1" | grep -Eq '^[0-9a-f]{64}$' && [ "$s1" = "$s2" ]
ok $? "autotools-sum is a stable sha256 ($s1)"

PY=/usr/bin/python3
if ! [ -x $PY ] || ! $PY -c 'import numpy' 2>/dev/null; then
    skip 1 "no /usr/bin/python3 with numpy: the dump comparison, the peer, verify and bench"
    done_testing
    exit
fi
args="--config tiny --batch 2 --masks 3 --points 2 --synthetic-batch 5 --seed 3 --threads 1"
run_ok "a dump of one step" sa1b-train $args --dump-step "$TMP/a.st"
run_ok "dumpcmp: a dump against itself" $PY "$SRC/tests/bench/gpu_dumpcmp.py" "$TMP/a.st" "$TMP/a.st"
grep_ok '^ok: [0-9]+ tensors' "$TMP/.out" "it says ok"
# one gradient scaled by 1 + 1e-3, and an input changed: both must fail
$PY - "$TMP/a.st" "$TMP/g.st" "$TMP/i.st" <<'EOF'
import json, struct, sys
import numpy as np
buf = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", buf[:8])[0]
head = json.loads(buf[8:8 + n])
def patched(name, fn):
    d = bytearray(buf)
    b, e = head[name]["data_offsets"]
    a = np.frombuffer(bytes(d[8 + n + b:8 + n + e]), dtype=np.float32).copy()
    d[8 + n + b:8 + n + e] = fn(a).astype(np.float32).tobytes()
    return bytes(d)
open(sys.argv[2], "wb").write(patched("grad.dec.layers.0.mlp.fc1.w", lambda a: a * 1.001))
open(sys.argv[3], "wb").write(patched("in.points", lambda a: a + 1))
EOF
run_status 1 "dumpcmp: a gradient off by 1e-3" $PY "$SRC/tests/bench/gpu_dumpcmp.py" "$TMP/g.st" "$TMP/a.st"
grep_ok 'MISMATCH grad.dec.layers.0.mlp.fc1.w: relative error 1.0' "$TMP/.out" "names the gradient and its error"
run_status 1 "dumpcmp: other inputs" $PY "$SRC/tests/bench/gpu_dumpcmp.py" "$TMP/i.st" "$TMP/a.st"
# the 16-bit rule (--ref: the error against the fp32 dump, over the CPU's
# own): bf16 against itself passes; a gradient 20% off (the CPU's bf16 is
# within 2% of fp32 on that weight of tiny), or the bf16 dump held to the
# fp16 one's distance from fp32, fails
run_ok "a bf16 dump of the same step" sa1b-train $args --precision bf16 --dump-step "$TMP/b.st"
run_ok "dumpcmp --ref: a bf16 dump against itself" $PY "$SRC/tests/bench/gpu_dumpcmp.py" "$TMP/b.st" "$TMP/b.st" \
    --ref "$TMP/a.st"
grep_ok '^ok: [0-9]+ tensors.*\(ratios: ' "$TMP/.out" "it says ok, in ratios"
$PY - "$TMP/b.st" "$TMP/b5.st" "$TMP/bnan.st" <<'EOF'
import json, struct, sys
import numpy as np
buf = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", buf[:8])[0]
b, e = json.loads(buf[8:8 + n])["grad.enc.blocks.0.mlp.fc1.w"]["data_offsets"]
a = np.frombuffer(bytes(buf[8 + n + b:8 + n + e]), dtype=np.float32) * np.float32(1.2)
buf[8 + n + b:8 + n + e] = a.astype(np.float32).tobytes()
open(sys.argv[2], "wb").write(bytes(buf))
a[0] = np.nan
buf[8 + n + b:8 + n + e] = a.astype(np.float32).tobytes()
open(sys.argv[3], "wb").write(bytes(buf))
EOF
run_status 1 "dumpcmp --ref: a gradient 20% off" $PY "$SRC/tests/bench/gpu_dumpcmp.py" "$TMP/b5.st" "$TMP/b.st" \
    --ref "$TMP/a.st"
grep_ok '^MISMATCH grad.enc.blocks.0.mlp.fc1.w: error against fp32 ' "$TMP/.out" "names the gradient"
run_status 1 "dumpcmp --ref: B not finite there (nothing to hold A to)" $PY "$SRC/tests/bench/gpu_dumpcmp.py" \
    "$TMP/b5.st" "$TMP/bnan.st" --ref "$TMP/a.st"
grep_ok "^MISMATCH grad.enc.blocks.0.mlp.fc1.w: B's error against fp32 is not finite" "$TMP/.out" "says so"
run_ok "an fp16 dump of the same step" sa1b-train $args --precision fp16 --dump-step "$TMP/h.st"
run_status 1 "dumpcmp --ref: bf16 held to fp16's error" $PY "$SRC/tests/bench/gpu_dumpcmp.py" "$TMP/b.st" \
    "$TMP/h.st" --ref "$TMP/a.st"
grep_ok '^MISMATCH grad\.\*: error against fp32 ' "$TMP/.out" "over all gradients too"
run_ok "dumpcmp --ref: fp16 held to bf16's error" $PY "$SRC/tests/bench/gpu_dumpcmp.py" "$TMP/h.st" "$TMP/b.st" \
    --ref "$TMP/a.st"
run_ok "gpu_torch.py flops" $PY "$SRC/tests/bench/gpu_torch.py" flops "$TMP/a.st"
grep_ok '"flops_per_step": [1-9][0-9.e+]*, "batch": 2, "masks": 3, "points": 2' "$TMP/.out" "FLOPs of the dump's batch"
if $PY -c 'import torch' 2>/dev/null; then
    run_ok "PyTorch peer on the CPU (fp32, 2 steps)" $PY "$SRC/tests/bench/gpu_torch.py" peer "$TMP/a.st" \
        --device cpu --precision fp32 --steps 2
    grep_ok '"images_per_s": [0-9.e+-]*, "peak_bytes": [1-9]' "$TMP/.out" "the peer reports images/s and its peak"
else
    skip 2 "no torch in /usr/bin/python3"
fi

# the whole of verify and bench on this build: without a device the CPU
# parts, then one line; the self-test through every step on the CPU backend
# (the parsing of sa1b-train's log, memory report and plan included)
export GPU_CHECK_PREBUILT="$BUILD" GPU_CHECK_PYTHON=$PY
run_status 1 "verify without a device" sh "$GC" verify "$TMP/nd"
is "$(tail -1 "$TMP/.out" | cut -c1-16)" "no CUDA device: " "it ends with one line saying so"
grep_ok '^harness: dump small-bf16 cpu/cpu +ok' "$TMP/.out" "the dump comparison ran CPU against CPU"
test -s "$TMP/nd/summary.md" && test -s "$TMP/nd/logs.tar.gz"
ok $? "summary.md and logs.tar.gz written"
GPU_CHECK_SELFTEST=cpu run_ok "self-test of verify (CPU backend)" sh "$GC" verify "$TMP/v"
for c in "dump-step small-fp32 cuda/cpu" "PyTorch reference (cuda dump)" "two runs identical (bf16)" \
    "checkpointing on/off identical (fp32)" "resume exact" "plan vs device peak: small-fp32" \
    "--plan --memory-budget auto"; do
    grep -F -e "$c" "$TMP/.out" | grep -q " ok "
    ok $? "self-test: $c ok"
done
grep_ok 'nothing ran on a GPU' "$TMP/.out" "says that nothing ran on a GPU"
GPU_CHECK_SELFTEST=cpu run_ok "self-test of attn (CPU backend)" sh "$GC" attn "$TMP/at"
is "$(grep -c '^gpu-check: attn [a-z]*-[a-z0-9]*-[a-z]* *ok ' "$TMP/.err")" 32 \
    "attn: 2 configurations x 4 shapes x 4 paths, each ok"
is "$(grep -m1 '^gpu-check: attn ' "$TMP/.err" | awk '{ print $3 }')" "small-enc-cudnn" \
    "the largest configuration's encoder first, cuDNN first"
grep_ok '^\| small \| enc N=1 Tq=[0-9]+ Tk=[0-9]+ heads=[0-9]+ dh=[0-9]+ \| blocked \| fp32 \| ok \| - \| [0-9]+ \| [0-9]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.e+-]+ \| [0-9.e+-]+ \| 0 \| [0-9.e+-]+ \| yes \|$' \
    "$TMP/at/attn.md" "attn.md: the blocked path is its own fp32 reference, two runs the same bits"
grep_ok 'nothing ran on a GPU' "$TMP/.out" "attn says that nothing ran on a GPU"
# one case killed by a signal, one that cannot run: each a failure, the rest run
cat >"$TMP/case.sh" <<EOF
#!/bin/sh
case " \$* " in *" tiny --batch 1 --masks 2 --shape self --path flash "*) kill -SEGV \$\$ ;; esac
case " \$* " in *" tiny --batch 1 --masks 2 --shape t2i --path fused "*) exec "$BUILD/tests/gpu-attn-case" "\$@" --reps ;; esac
exec "$BUILD/tests/gpu-attn-case" "\$@"
EOF
chmod +x "$TMP/case.sh"
GPU_CHECK_SELFTEST=cpu GPU_CHECK_ATTN_CASE="$TMP/case.sh" run_status 1 "attn with a case that crashes" sh "$GC" attn "$TMP/ac"
grep_ok '^gpu-check: attn tiny-self-flash +fail +exit 139' "$TMP/.err" "the crash is the case's failure, with its status"
grep_ok '^gpu-check: attn tiny-t2i-fused +fail +exit 2' "$TMP/.err" "a case that cannot run is a failure too"
is "$(grep -c '^gpu-check: attn .* ok ' "$TMP/.err")" 30 "the other 30 cases ran"
grep_ok '2 check\(s\) failed' "$TMP/.out" "the summary counts the two"
GPU_CHECK_SELFTEST=cpu GPU_CHECK_DEADLINE=0 run_ok "attn past its deadline" sh "$GC" attn "$TMP/ad"
is "$(grep -c '^gpu-check: attn .* not run *time: GPU_CHECK_DEADLINE=0 s' "$TMP/.err")" 32 "every case: not run (time)"
grep_ok "^gpu-check: attn cases not run +incomplete +32 past" "$TMP/.err" "one row counts them"
if $PY -c 'import torch' 2>/dev/null; then
    GPU_CHECK_SELFTEST=cpu run_ok "self-test of bench (CPU backend)" sh "$GC" bench "$TMP/b"
    grep_ok '^\| base-fp32-ckpt \| 1 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+% \| [0-9]+ \|$' "$TMP/b/report.md" "report.md has the runs' table"
    grep_ok '^\| base bf16 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+x \|' "$TMP/b/report.md" "and the peer side by side"
    grep_ok '^target: data wait < 2%' "$TMP/.out" "the data wait over shards was measured"
    grep_ok '^\| base-bf16-fused-attn \| 1 \| [0-9.]+ \|' "$TMP/b/report.md" "and the run with the fused attention alone"
else
    skip 5 "no torch in $PY"
fi
done_testing
