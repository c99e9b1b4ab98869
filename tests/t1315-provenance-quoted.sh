#!/bin/sh
# t1315: what sa1b-inspect --summary and sa1b-verify quote from a shard's
# provenance (its input's name, the sample its input ended after) is one
# line: control bytes escaped as \n, \t.  The provenance is rewritten in
# place (tests/shard_restamp.py --replace) as a crafted shard would hold it.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
[ -x /usr/bin/python3 ] || skip_all "no /usr/bin/python3"
cd "$TMP" || exit 99
sa1b-synth --quiet -n 4 -W 160 -H 120 -m 4 -s 3 -o a.tar || exit 99
size=$(stat -c %s a.tar)
head -c $((size / 2 + 100)) a.tar >cut.tar
sa1b-shard -q --image-size 32 -o out/ cut.tar 2>/dev/null
[ -f out/cut.shard ] || { echo "Bail out! no shard of the cut input"; exit 99; }
after=$(sa1b-inspect out/cut.shard | head -1 | sed -n 's/.*"input_ends_after": "\([^"]*\)".*/\1/p')
[ -n "$after" ] || { echo "Bail out! no input_ends_after"; exit 99; }
/usr/bin/python3 "$SRC/tests/shard_restamp.py" --replace '"input":"cut"' '"input":"c\n"' out/cut.shard || exit 99
pad=$(printf '%*s' $((${#after} - 4)) '' | tr ' ' x)   # \t\n and x's: the length of the name
/usr/bin/python3 "$SRC/tests/shard_restamp.py" --replace "\"input_ends_after\":\"$after\"" \
    "\"input_ends_after\":\"\\t$pad\\n\"" out/cut.shard || exit 99

sa1b-inspect --summary out/cut.shard >sum
is "$?" "0" "sa1b-inspect --summary reads the shard"
grep_ok "^input            c\\\\n: [0-9]+ bytes, crc32c [0-9a-f]{8}, ended early, after \\\\t${pad}\\\\n \(the images after it are missing\)$" \
    sum "its input line quotes the names escaped"
is "$(sed -n '/^input /,/^masks per image/p' sum | wc -l)" "2" "the input line is one line"

sa1b-verify out/cut.shard >vout 2>verr
is "$?" "4" "sa1b-verify: incomplete"
is "$(wc -l <vout)" "1" "its result is one line"
grep_ok "^out/cut.shard: incomplete \(.*after sample \\\\t${pad}\\\\n\)$" vout "the sample's name escaped"
is "$(wc -l <verr)" "1" "its message is one line"
done_testing
