#!/bin/sh
# t1553: a run's sweep of stale temporaries never takes another run's
# finished part for stale.  Run A is stopped right after its writer renamed
# a finished part to its partial name (SA1B_TEST_PAUSE=finish) and run B,
# writing the same output, starts and ends meanwhile: A's partial is still
# there, both exit 0 and the output is a complete shard.  A temporary's name
# carries its run's token, which the run holds locked (a byte range of
# OUT/.sa1b-shard.lock) from start to end, so B need not wait for A.
# Before (first version): B removed A's partial ("removed
# '...a.shard.partial.XXXXXX', a temporary of an earlier run") and A failed
# with "cannot rename ...: No such file or directory".
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
command -v timeout >/dev/null || skip_all "no timeout"
mkfifo "$TMP/p" "$TMP/p.go" || skip_all "no mkfifo"
sa1b-synth --quiet -n 4 -W 120 -H 80 -m 4 -o "$TMP/a.tar" || exit 99
opts="-j 1 --image-size 32"
mkdir "$TMP/o"
SA1B_TEST_PAUSE="finish:1:$TMP/p" sa1b-shard $opts -o "$TMP/o" "$TMP/a.tar" 2>"$TMP/err-a" & a=$!
timeout 120 cat "$TMP/p" >/dev/null
ok $? "run A stops after its writer finished the shard"
sa1b-shard $opts -o "$TMP/o" "$TMP/a.tar" 2>"$TMP/err-b" & b=$!
# B runs to its end while A is stopped: A's partial carries A's token,
# which A holds locked in the folder's lock file, so B's sweep leaves it
i=0
while [ $i -lt 1200 ] && kill -0 $b 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
is "$(ls "$TMP/o" | grep -c '^a\.shard\.partial\.')" "1" "A's finished partial is still there while A is stopped"
timeout 120 sh -c ': >"$1"' _ "$TMP/p.go"
wait $a
is "$?" "0" "run A: exit 0"
wait $b
is "$?" "0" "run B: exit 0"
grep -q "a temporary of an earlier run" "$TMP/err-b"
ok $((!$?)) "B removed no temporary of A"
is "$(ls -a "$TMP/o" | grep -v '^\.' | tr '\n' ' ')" "a.shard " "a complete shard, nothing else"
is "$(shard_ids "$TMP/o/a.shard")" "1 2 3 4 " "with the images"
[ -s "$TMP/err-a" ] && sed 's/^/# A: /' "$TMP/err-a"
kill $a $b 2>/dev/null
done_testing
