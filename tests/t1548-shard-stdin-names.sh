#!/bin/sh
# t1548: every message about standard input names it "standard input", as
# the man page says, never '-': an empty input, one that is not a tar, and
# the per-sample and end-of-input lines.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
opts="-j 2 --image-size 32"
: >"$TMP/e.tar"
sa1b-shard $opts -q -o "$TMP/e.shard" - <"$TMP/e.tar" 2>"$TMP/err"
is "$?" 3 "empty standard input: exit 3"
grep_ok "^sa1b-shard: standard input: empty input: not a tar archive$" "$TMP/err" "empty: named standard input"
printf 'this is not a tar archive, just some text that goes on for a while\n%.0s' 1 2 3 4 5 6 7 8 9 10 >"$TMP/text"
sa1b-shard $opts -q -o "$TMP/t.shard" - <"$TMP/text" 2>"$TMP/err"
is "$?" 3 "not a tar on standard input: exit 3"
grep_ok "^sa1b-shard: standard input: not a tar archive" "$TMP/err" "not a tar: named standard input"
sa1b-synth --quiet -n 4 -W 64 -H 48 -m 2 -o "$TMP/a.tar" || exit 99
size=$(stat -c %s "$TMP/a.tar")
head -c $((size / 2 + 100)) "$TMP/a.tar" | sa1b-shard $opts -q -o "$TMP/c.shard" - 2>"$TMP/err"
is "$?" 1 "a cut tar on standard input: exit 1"
grep_ok "^sa1b-shard: standard input: input ends early" "$TMP/err" "the cut: named standard input"
sa1b-shard $opts -q -o "$TMP/e.shard" - <"$TMP/e.tar" 2>"$TMP/err1"
sa1b-shard $opts -q -o "$TMP/t.shard" - <"$TMP/text" 2>>"$TMP/err1"
head -c $((size / 2 + 100)) "$TMP/a.tar" | sa1b-shard $opts -q -o "$TMP/c.shard" - 2>>"$TMP/err1"
! grep -q "'-'" "$TMP/err1"
ok $? "no message names the input '-'"
done_testing
