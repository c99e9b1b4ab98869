#!/bin/sh
# t1557: a run holds no file descriptor per finished part, and its list of
# temporaries never drops one.  Before: with 'ulimit -n 40' a 50-image tar
# at --max-images 1 failed with "Too many open files" (one descriptor held
# per part until the commit), and past 512 parts temporaries were no
# longer registered, so SIGTERM left partials behind.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
sa1b-synth --quiet -n 50 -W 32 -H 32 -m 1 -o "$TMP/b50.tar" || exit 99
S="sa1b-shard -q -j 1 --image-size 16"
(ulimit -n 40 && exec $S --max-images 1 -o "$TMP/o1" "$TMP/b50.tar") 2>"$TMP/err"
ok $? "50 parts with 40 file descriptors: exit 0"
[ -s "$TMP/err" ] && sed 's/^/# /' "$TMP/err" | head -3
is "$(ls "$TMP/o1" | grep -c '\.shard$')" "50" "50 parts"
sa1b-synth --quiet -n 520 -W 32 -H 32 -m 1 -o "$TMP/big.tar" || exit 99
SA1B_TEST_KILL=part:515 $S --max-images 1 -o "$TMP/o8" "$TMP/big.tar" 2>"$TMP/err"
is "$?" "143" "killed by SIGTERM after 515 finished parts"
is "$(ls "$TMP/o8" | grep -c partial)" "0" "no partial is left"
is "$(ls "$TMP/o8" | grep -c '\.shard$')" "0" "and no part in place"
done_testing
