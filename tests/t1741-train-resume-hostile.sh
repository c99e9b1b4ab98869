#!/bin/sh
# t1741 (issue 39): a crafted state file cannot set options on --resume.
# The run record is stored as run.<key> metadata, one "key=value" line
# each, values percent-encoded; a value holding a raw newline added a line
# of its own ("run.steps": "2\nckpt_every=1" set --ckpt-every 1), which
# --resume fed to the option parser.  Such an entry, a key sa1b-train does
# not write, and a key it does not know are refused in one line, nothing
# trained; an encoded newline (%0A) is read literally, as one value; a
# record sa1b-train wrote (a --data path with ' ', '%', '"' and '=') reads
# back the same: the run continues bit for bit.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null || skip_all "sa1b-synth or sa1b-shard not built"
command -v python3 >/dev/null || skip_all "python3 needed to craft the state files"
run="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --batch 2 --masks 2 --points 1 --threads 2 -q"
# shellcheck disable=SC2086
run_ok "a run of 4 steps, a checkpoint every 2" sa1b-train $run --synthetic-batch 1 --steps 4 --ckpt-every 2 \
    --log-every 1 --out "$TMP/a"
from2() { # DIR: the run as it was after its step-2 checkpoint
    rm -rf "$1"
    mkdir -p "$1"
    cp "$TMP/a/model-2.safetensors" "$TMP/a/state-2.bin" "$1/"
    echo 2 >"$1/latest"
    head -2 "$TMP/a/log.jsonl" >"$1/log.jsonl"
}
# craft FILE KEY=VALUE...: sets (or, with the value DEL, removes) metadata
# entries of the state file; "\n" in a value is a newline
craft() {
    python3 - "$@" <<'PY' || exit 99
import json, struct, sys
path = sys.argv[1]
b = open(path, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    if v == "DEL":
        del h["__metadata__"][k]
    else:
        h["__metadata__"][k] = v.replace("\\n", "\n")
j = json.dumps(h).encode()
j += b" " * ((8 - len(j) % 8) % 8)
open(path, "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
PY
}
untouched() { # DIR DESC: nothing trained, nothing written
    is "$(cat "$1/latest") $(files "$1")" "2 latest log.jsonl model-2.safetensors state-2.bin " "$2"
}

from2 "$TMP/b"
craft "$TMP/b/state-2.bin" 'run.steps=2\nckpt_every=1'
run_status 3 "a record value with a newline is refused" sa1b-train --resume "$TMP/b" --steps 4
is "$(wc -l <"$TMP/.err" | tr -d ' ')" "1" "in one line"
grep_ok "^sa1b-train: cannot resume: '$TMP/b/state-2\.bin': its run record's entry 'run\.steps' is not one sa1b-train writes" \
    "$TMP/.err" "naming the file and the entry"
untouched "$TMP/b" "it sets no --ckpt-every 1: nothing is trained"

from2 "$TMP/c"
craft "$TMP/c/state-2.bin" 'run.lr\nckpt_every=1'
run_status 3 "a record key with a newline is refused" sa1b-train --resume "$TMP/c" --steps 4
is "$(wc -l <"$TMP/.err" | tr -d ' ')" "1" "in one line, the key escaped"
untouched "$TMP/c" "nothing is trained"

from2 "$TMP/d"
craft "$TMP/d/state-2.bin" 'run.overwrite=1'
run_status 3 "a record key sa1b-train does not know is refused" sa1b-train --resume "$TMP/d" --steps 4
grep_ok "its run record holds the setting 'overwrite', which this sa1b-train does not know" "$TMP/.err" \
    "naming the key"
untouched "$TMP/d" "nothing is trained"

from2 "$TMP/e"
craft "$TMP/e/state-2.bin" 'run.val=x%0Ackpt_every=1'
sa1b-train --resume "$TMP/e" --steps 4 >"$TMP/.out" 2>"$TMP/.err"
[ $? -ne 0 ]
ok $? "an encoded newline is a byte of the value: --val is one path that does not exist"
is "$(wc -l <"$TMP/.err" | tr -d ' ')" "1" "said in one line"
grep_ok "x\\\\nckpt_every=1" "$TMP/.err" "the value quoted whole, its newline escaped"
untouched "$TMP/e" "no option is set by it: nothing is trained"

# what sa1b-train writes reads back the same: a path with ' ', '%', '"', '='
run_ok "synthesise" sa1b-synth -n 6 -W 120 -H 80 -m 5 -s 1 -o "$TMP/t.tar" --quiet
mkdir -p "$TMP/d ir%\"x"
run_ok "shard into a folder named with ' ', '%' and '\"'" sa1b-shard --image-size 64 --mask-size 16 \
    -o "$TMP/d ir%\"x/t=1.shard" "$TMP/t.tar"
# shellcheck disable=SC2086
run_ok "a run of 4 steps on it" sa1b-train $run --data "$TMP/d ir%\"x/t=1.shard" --steps 4 --ckpt-every 2 \
    --log-every 1 --out "$TMP/p"
grep -a -q '"run.data":"[^"]*d ir%25%22x/t=1.shard"' "$TMP/p/state-2.bin"
ok $? "the record holds the path percent-encoded"
mkdir -p "$TMP/q"
cp "$TMP/p/model-2.safetensors" "$TMP/p/state-2.bin" "$TMP/q/"
echo 2 >"$TMP/q/latest"
head -2 "$TMP/p/log.jsonl" >"$TMP/q/log.jsonl"
run_ok "--resume DIR alone continues it from the recorded path" sa1b-train --resume "$TMP/q" -q
cmp -s "$TMP/p/model-4.safetensors" "$TMP/q/model-4.safetensors" && cmp -s "$TMP/p/state-4.bin" "$TMP/q/state-4.bin"
ok $? "bit for bit"
done_testing
