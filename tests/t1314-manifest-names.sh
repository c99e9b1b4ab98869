#!/bin/sh
# t1314: sa1b-inspect --manifest writes each relative name relative to the
# manifest's folder, where its readers resolve it: the usual
# 'sa1b-inspect --manifest -o mi/manifest.json mi/*.shard' lists
# 'a.shard' (before: refused, exit 2, the names being relative to the
# current folder), a manifest in another folder lists '../mi/a.shard', one
# reached through a link or from a subfolder too; the loader and
# sa1b-verify read each back as the same files; names that already name
# the file from there, and absolute names, stay as given.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
cd "$TMP" || exit 99
sa1b-synth --quiet -n 4 -W 160 -H 120 -m 5 -s 1 -o a.tar || exit 99
sa1b-synth --quiet -n 4 -W 160 -H 120 -m 5 -s 2 --first-id 20 -o b.tar || exit 99
sa1b-shard -q --image-size 32 --mask-size 8 -o mi/ a.tar b.tar || exit 99
names() { grep '"file"' "$1" | sed 's/.*"file": "\(.*\)",$/\1/' | tr '\n' ' '; }
sa1b-loadbench -q -b 2 -e 1 -s 3 --print-ids mi/a.shard mi/b.shard >ids.want 2>/dev/null || exit 99

run_ok "--manifest -o mi/manifest.json mi/*.shard" sa1b-inspect --manifest -o mi/manifest.json mi/a.shard mi/b.shard
is "$(names mi/manifest.json)" "a.shard b.shard " "lists the names relative to mi/"
run_ok "sa1b-verify reads it" sa1b-verify -q --manifest mi/manifest.json
sa1b-loadbench -q -b 2 -e 1 -s 3 --print-ids mi/manifest.json >ids.got 2>/dev/null
cmp -s ids.want ids.got
ok $? "and the loader sees the batches of the glob"

mkdir el sub
run_ok "--manifest -o el/m.json mi/*.shard" sa1b-inspect --manifest -o el/m.json mi/a.shard mi/b.shard
is "$(names el/m.json)" "../mi/a.shard ../mi/b.shard " "lists them relative to el/"
sa1b-loadbench -q -b 2 -e 1 -s 3 --print-ids el/m.json >ids.got 2>/dev/null
cmp -s ids.want ids.got
ok $? "which the loader reads as the same files"
ln -s mi link
(cd sub && sa1b-inspect --manifest -o ../el/l.json ../link/a.shard ../mi/b.shard) 2>.err
ok $? "from a subfolder, one shard through a link to its folder"
is "$(names el/l.json)" "../link/a.shard ../mi/b.shard " "names relative to el/"
run_ok "which verify" sa1b-verify -q --manifest el/l.json
run_ok "names that name the files from there already" sa1b-inspect --manifest -o ./m.json mi/a.shard ./mi/b.shard
is "$(names m.json)" "mi/a.shard ./mi/b.shard " "stay as given"
run_ok "absolute names" sa1b-inspect --manifest -o el/abs.json "$TMP/mi/a.shard"
is "$(names el/abs.json)" "$TMP/mi/a.shard " "stay absolute"
done_testing
