#!/bin/sh
# t1544: sa1b-shard --json-summary checks that its summary reached standard
# output: a full device is one line and exit 3, not a silent exit 0.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
[ -w /dev/full ] || skip_all "no /dev/full"
sa1b-synth --quiet -n 2 -W 64 -H 48 -m 2 -o "$TMP/a.tar" || exit 99
sa1b-shard -q -j 1 --image-size 16 --json-summary -o "$TMP/a.shard" "$TMP/a.tar" >/dev/full 2>"$TMP/err"
is "$?" "3" "--json-summary to a full device: exit 3"
is "$(cat "$TMP/err")" "sa1b-shard: standard output: No space left on device" "one line says so"
run_ok "the shard itself is written" sa1b-verify -q "$TMP/a.shard"
run_ok "--json-summary to a file: exit 0" sa1b-shard -q -j 1 --image-size 16 --json-summary -o "$TMP/a.shard" "$TMP/a.tar"
grep_ok '^\{"images":2,.*"exit":0\}$' "$TMP/.out" "the summary"
done_testing
