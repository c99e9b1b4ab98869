#!/bin/sh
# t1004-sa1b-rle-hostile.sh - sa1b-rle on hostile input: every message that
# quotes an argument, a file name or JSON text is one line, its control
# bytes escaped (\n, \xHH); a PNG that claims far more pixels than its bytes
# can hold is refused before anything is allocated for it.  (The parsers
# themselves are fuzzed: tests/fuzz/fuzz-rle-input.c, replayed by
# tests/fuzz/replay-rle-input.)
. "$top_srcdir/tests/test-lib.sh"
cd "$TMP" || exit 99

# one_line DESC: stderr is exactly one line (a usage error's hint "Try ..."
# aside) and holds no control byte but its newline
one_line() {
    grep -v "^Try 'sa1b-rle --help'" .err > .msg
    n=$(wc -l < .msg)
    bad=$(tr -d '\n' < .msg | LC_ALL=C tr -d '\040-\176\200-\377' | wc -c)
    [ "$n" -eq 1 ] && [ "$bad" -eq 0 ]
    ok $? "$1"
    [ "$n" -eq 1 ] && [ "$bad" -eq 0 ] || sed 's/^/# stderr: /' .err | cat -v
}
nl='
'
esc=$(printf '\033')

run_status 1 "a mask argument with a newline in bad counts" sa1b-rle iou "3x4:32${nl}201" '3x4:32201'
one_line "... one line"
grep_ok "'3x4:32\\\\n201'" .err "... the newline shown as \\n"
run_status 2 "a bad size with an escape byte" sa1b-rle iou "3${esc}x4:0" '3x4:32201'
one_line "... one line"
grep_ok "bad size '3\\\\x1bx4'" .err "... the byte shown as \\x1b"
run_status 1 "invalid JSON with a newline in a string" sa1b-rle iou "{\"size\":[3,4],\"counts\":\"32${nl}201\"}" '3x4:32201'
one_line "... one line"
run_status 2 "decode --size with a newline" sa1b-rle decode --size "3${nl}x4" --counts 0
one_line "... one line"
run_status 2 "an unknown command with a newline" sa1b-rle "frob${nl}nicate"
one_line "... one line"

# info: a line of JSON text holding control bytes
printf '{"size":[3,4],"counts":"3\0012201"}\n{"size":[3,4],"cou\001nts":1}\n' > ctl.json
run_status 1 "info on JSON with control bytes" sa1b-rle info ctl.json
n=$(wc -l < .err)
bad=$(tr -d '\n' < .err | LC_ALL=C tr -d '\040-\176\200-\377' | wc -c)
[ "$n" -eq 2 ] && [ "$bad" -eq 0 ]
ok $? "... one line per bad value, no control byte"
[ "$n" -eq 2 ] && [ "$bad" -eq 0 ] || sed 's/^/# stderr: /' .err | cat -v
cp ctl.json "ctl${nl}name.json"
run_status 1 "info on a file whose name holds a newline" sa1b-rle info "ctl${nl}name.json"
grep_ok '^sa1b-rle: ctl\\nname\.json:1: ' .err "... the name escaped on each line"
run_status 1 "a missing file whose name holds a newline" sa1b-rle info "no${nl}such"
one_line "... one line"
run_status 3 "encode of a missing file whose name holds a newline" sa1b-rle encode --pgm "no${nl}such"
one_line "... one line"

# a PNG of 100-odd bytes that says it is 65535x65535 (4 GiB of pixels)
if command -v python3 >/dev/null 2>&1; then
    python3 - <<'PY' || exit 99
import struct, zlib
def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
open('bomb.png', 'wb').write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 65535, 65535, 8, 0, 0, 0, 0))
                            + chunk(b'IDAT', zlib.compress(b'\0' * 100)) + chunk(b'IEND', b''))
PY
    # (read as it stood, it had 4 GiB allocated before its data ran out)
    run_status 1 "a PNG that claims 65535x65535 in $(wc -c < bomb.png) bytes" sa1b-rle encode --png bomb.png
    grep_ok "'bomb\.png': image too large" .err "... refused as too large"
    one_line "... one line"
else
    skip 3 "no python3 to write the PNG"
fi
done_testing
