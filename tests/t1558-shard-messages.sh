#!/bin/sh
# t1558: on a terminal, every message starts on a line of its own (the
# progress bar is ended first), and the lines that say what a commit
# removed are printed with -q too (-q only removes the bar and the
# summary).  Before: 'removed ...' ran on from the bar
# ("...15.9 MB/ssa1b-shard: removed 'o7/a-00002.shard'") and -q hid it.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
sa1b-synth --quiet -n 6 -W 120 -H 80 -m 4 -o "$TMP/a.tar" || exit 99
S="sa1b-shard -j 1 --image-size 32"
$S -q --max-images 2 -o "$TMP/o5" "$TMP/a.tar" || exit 99
run_ok "-q, a set of fewer parts" $S -q --max-images 4 -o "$TMP/o5" "$TMP/a.tar"
grep_ok "^sa1b-shard: removed '$TMP/o5/a-00002.shard', left from an earlier run of this output$" "$TMP/.err" \
    "the removal is said with -q"
if command -v script >/dev/null && script -qec true /dev/null >/dev/null 2>&1; then
    $S -q --max-images 2 -o "$TMP/o7" "$TMP/a.tar" || exit 99
    : >"$TMP/o7/a-00000.shard.partial"
    script -qec "$S --max-images 4 -o '$TMP/o7' '$TMP/a.tar'" "$TMP/typescript" >/dev/null 2>&1
    tr '\r' '\n' <"$TMP/typescript" | sed 's/\x1b\[K//g' >"$TMP/lines"
    grep_ok "^sa1b-shard: removed '$TMP/o7/a-00002.shard'" "$TMP/lines" "the removal starts a line"
    grep_ok "^sa1b-shard: removed '$TMP/o7/a-00000.shard.partial', a temporary" "$TMP/lines" "so does the sweep's"
    grep -q ".sa1b-shard: removed" "$TMP/lines"
    ok $((!$?)) "no message runs on from the bar"
else
    skip 3 "no script(1)"
fi
done_testing
