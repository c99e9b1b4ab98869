#!/bin/sh
# t1740 (issue 39): a message that quotes input is one line, whatever the
# input holds: jansson's text of a manifest whose string is cut by a
# newline (sa1b-verify --manifest, sa1b-train --data), of an annotation
# (sa1b-shard), of a checkpoint's header (sa1b-train --init), a tar member's
# name with a newline, a metadata value with control bytes.  Each is
# escaped (\n, \xHH) and the line still names the file and the problem.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null && command -v sa1b-shard >/dev/null || skip_all "sa1b-synth or sa1b-shard not built"
command -v python3 >/dev/null || skip_all "python3 needed to craft the inputs"

# one_line DESC: stderr ($TMP/.err) is exactly one line, with no escape byte
one_line() {
    is "$(wc -l <"$TMP/.err" | tr -d ' ')" "1" "$1: one line"
    tr -d '\n' <"$TMP/.err" | LC_ALL=C grep -q "$(printf '[\001-\037\177]')"
    [ $? -ne 0 ]
    ok $? "$1: no control byte in it"
}

printf '{"s": [{"file": "\\\n..."}]}' >"$TMP/m.json"
run_status 1 "sa1b-verify --manifest refuses the manifest" sa1b-verify --manifest "$TMP/m.json"
one_line "sa1b-verify --manifest"
grep_ok "'$TMP/m.json': not JSON: line 2, column 0: invalid escape near '\"\\\\\\\\n'" "$TMP/.err" \
    "naming the manifest and jansson's reason, the newline escaped"
run_status 3 "sa1b-train --data MANIFEST refuses it" sa1b-train --config tiny --data "$TMP/m.json" --steps 1 \
    --out "$TMP/r1" -q
one_line "sa1b-train --data MANIFEST"

run_ok "synthesise a sample" sa1b-synth -n 1 -W 64 -H 48 -m 2 -s 1 -o "$TMP/s.tar" --quiet
python3 - "$TMP/s.tar" "$TMP/bad.tar" <<'PY' || exit 99
import io, sys, tarfile
src = tarfile.open(sys.argv[1])
jpg = [src.extractfile(m).read() for m in src.getmembers() if m.name.endswith(".jpg")][0]
with tarfile.open(sys.argv[2], "w", format=tarfile.GNU_FORMAT) as t:
    for name, data in (("sa_1.jpg", jpg), ("sa_1.json", b'{"image": {"image_id": 1, "file_name": "\\\n.jpg"}}'),
                       ("sa_\n2.jpg", jpg)):
        i = tarfile.TarInfo(name)
        i.size = len(data)
        t.addfile(i, io.BytesIO(data))
PY
sa1b-shard --image-size 64 -o "$TMP/sh/" "$TMP/bad.tar" >"$TMP/.out" 2>"$TMP/shard.err"
grep -v ' images, ' "$TMP/shard.err" >"$TMP/.err"
is "$(wc -l <"$TMP/.err" | tr -d ' ')" "2" "sa1b-shard: one line for each of the two bad samples"
tr -d '\n' <"$TMP/.err" | LC_ALL=C grep -q "$(printf '[\001-\037\177]')"
[ $? -ne 0 ]
ok $? "sa1b-shard: no control byte in them"
grep_ok "sa_1\.json: line 2 column 0: invalid escape near" "$TMP/.err" "the annotation's line names the member"
grep_ok "'sa_\\\\n2\.jpg: no matching sa_\\\\n2\.json|sa_\\\\n2\.jpg: no matching sa_\\\\n2\.json" "$TMP/.err" \
    "the member's name with its newline escaped"

python3 - "$TMP" <<'PY' || exit 99
import struct, sys
for name, h in (("fmt.safetensors", b'{"__metadata__":{"format":"sa1b-train-model-1\\n\\u001b[31mX"}}'),
                ("json.safetensors", b'{"__metadata__":{"format":"\\\nX"}}')):
    h += b" " * ((8 - len(h) % 8) % 8)
    open(sys.argv[1] + "/" + name, "wb").write(struct.pack("<Q", len(h)) + h)
PY
run_status 3 "--init with a format that holds a newline and an escape is refused" sa1b-train --config tiny \
    --synthetic-batch 1 --steps 1 --init "$TMP/fmt.safetensors" --out "$TMP/r2" -q
one_line "--init, metadata value"
grep_ok "format 'sa1b-train-model-1\\\\n\\\\x1b\[31mX'" "$TMP/.err" "the value quoted, its newline and escape byte escaped"
run_status 3 "--init with a header JSON cut by a newline is refused" sa1b-train --config tiny \
    --synthetic-batch 1 --steps 1 --init "$TMP/json.safetensors" --out "$TMP/r3" -q
one_line "--init, jansson's text"
done_testing
