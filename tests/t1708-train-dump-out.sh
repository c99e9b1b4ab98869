#!/bin/sh
# t1708: --dump-step FILE never replaces an existing regular file unless
# --overwrite says so, and then only an earlier step dump (never a shard, a
# checkpoint or any other input); the model loader (--init, --eval-only,
# --resume) refuses a step dump and a state file, and still takes a model
# checkpoint written before the files were tagged with their format; a
# signal while the dump is written leaves it whole, no temporary.
. "$top_srcdir/tests/test-lib.sh"
common="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 1 --threads 2"
synth="$common --synthetic-batch 3"
sum() { cksum <"$1"; }

sa1b-synth --quiet -n 2 -W 96 -H 64 -m 3 -o "$TMP/a.tar" && sa1b-shard -q --image-size 64 -o "$TMP/d.shard" "$TMP/a.tar"
ok $? "a shard"
before=$(sum "$TMP/d.shard")
run_status 2 "--dump-step onto the --data shard is refused" sa1b-train $common --data "$TMP/d.shard" --dump-step "$TMP/d.shard"
grep_ok "^sa1b-train: --dump-step: '$TMP/d.shard' exists" "$TMP/.err" "the line names the file"
is "$(wc -l <"$TMP/.err" | tr -d ' ')" "1" "in one line"
run_status 2 "and with --overwrite too (not a dump)" sa1b-train $common --data "$TMP/d.shard" --dump-step "$TMP/d.shard" --overwrite
grep_ok "is not a step dump" "$TMP/.err" "which the line says"
is "$(sum "$TMP/d.shard")" "$before" "the shard is intact"

run_ok "a run with checkpoints" sa1b-train $synth -q --steps 4 --ckpt-every 2 --out "$TMP/r"
before=$(sum "$TMP/r/model-4.safetensors")
run_status 2 "--dump-step onto a model checkpoint is refused" sa1b-train $synth --dump-step "$TMP/r/model-4.safetensors"
run_status 2 "with --overwrite too" sa1b-train $synth --dump-step "$TMP/r/model-4.safetensors" --overwrite
is "$(sum "$TMP/r/model-4.safetensors")" "$before" "the checkpoint is intact"

run_ok "a dump to a new file" sa1b-train $synth --dump-step "$TMP/dump"
run_status 2 "a second dump to it is refused" sa1b-train $synth --dump-step "$TMP/dump"
chmod 600 "$TMP/dump"
run_ok "--overwrite replaces an earlier dump" sa1b-train $synth --dump-step "$TMP/dump" --overwrite
is "$(ls "$TMP" | grep -c tmp)" "0" "no temporary left"
is "$(stat -c %a "$TMP/dump")" "600" "the dump it replaced was private: so is the new one"
if [ "$(id -u)" = 0 ] && getent passwd nobody >/dev/null && getent group nogroup >/dev/null; then
    chown nobody:nogroup "$TMP/dump"
    run_ok "--overwrite of a dump of another owner (as root)" sa1b-train $synth --dump-step "$TMP/dump" --overwrite
    is "$(stat -c %U:%G "$TMP/dump")" "nobody:nogroup" "keeps its owner and group"
else
    skip 2 "needs root, user nobody and group nogroup"
fi

# a dump where the run's checkpoint was (what the unchecked overwrite did): refused by every loader
cp "$TMP/dump" "$TMP/r/model-4.safetensors"
run_status 3 "--resume from a dump in place of the checkpoint is refused" sa1b-train -q --resume "$TMP/r" --steps 6
grep_ok "model-4.safetensors': a --dump-step debug dump, not a model checkpoint" "$TMP/.err" "the line says why"
is "$(cat "$TMP/r/latest")" "4" "the run is left as it was"
run_status 3 "--init of a dump is refused" sa1b-train $synth -q --steps 1 --init "$TMP/dump" --out "$TMP/i"
run_status 3 "--eval-only of a dump is refused" sa1b-train $synth -q --eval-only "$TMP/dump"
run_status 3 "--eval-only of a state file is refused" sa1b-train $synth -q --eval-only "$TMP/r/state-2.bin"
grep_ok "a training state file, not a model checkpoint" "$TMP/.err" "the line says why"

# files written before the format tag: a model checkpoint loads, a dump does not
if [ -x /usr/bin/python3 ]; then
    untag() { /usr/bin/python3 -c 'import sys
p = sys.argv[1]; d = open(p, "rb").read(); n = d.replace(b"\"format\":", b"\"formaX\":", 1)
assert n != d; open(p, "wb").write(n)' "$1"; }
    cp "$TMP/r/model-2.safetensors" "$TMP/old-model" && untag "$TMP/old-model" && cp "$TMP/dump" "$TMP/old-dump" && untag "$TMP/old-dump"
    ok $? "untagged copies of a checkpoint and a dump"
    run_ok "--init of an untagged model checkpoint" sa1b-train $synth -q --steps 1 --init "$TMP/old-model" --out "$TMP/o"
    run_status 3 "--init of an untagged dump is refused" sa1b-train $synth -q --steps 1 --init "$TMP/old-dump" --out "$TMP/o2"
else
    skip 3 "no /usr/bin/python3"
fi

# SIGTERM while the dump is written (strace holds its fsync) ends the
# process once the dump is in place, whole: no temporary of the dump's size
# left beside it (before: FILE.tmp.PID.0 stayed, which nothing removes)
if command -v strace >/dev/null && command -v pgrep >/dev/null &&
    strace -f -qq -o /dev/null -e trace=fsync true 2>/dev/null; then
    mkdir "$TMP/k"
    run_ok "a dump in one go" sa1b-train $synth --dump-step "$TMP/whole"
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -o /dev/null -e trace=fsync \
        -e inject=fsync:delay_enter=1000000 sa1b-train $synth --dump-step "$TMP/k/dump" >/dev/null 2>&1 & s=$!
    i=0
    while [ $i -lt 600 ] && ! ls "$TMP/k" | grep -q tmp; do sleep 0.05; i=$((i + 1)); done
    c=$(pgrep -P $s)
    [ -n "$c" ] && kill -TERM $c
    wait $s 2>/dev/null
    is "$?" "143" "SIGTERM while the dump is written: the process ends of it"
    is "$(ls "$TMP/k" | tr '\n' ' ')" "dump " "with the dump in place and no temporary"
    cmp -s "$TMP/whole" "$TMP/k/dump"
    ok $? "the dump is whole"
else
    skip 4 "no strace (Debian: strace) or pgrep"
fi
done_testing
