#!/bin/sh
# t1559: the runs writing into one folder lock a regular file there,
# .sa1b-shard.lock (fcntl locks, which hold on NFS, where flock() on a
# folder fails), created when missing and never removed; a lock that
# cannot be taken is said in one line and the run goes on.  The hidden
# file trips no shard tool.  Before: the folder itself was flock()ed, and a
# failure to lock it was silent.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
sa1b-synth --quiet -n 3 -W 120 -H 80 -m 4 -o "$TMP/a.tar" || exit 99
S="sa1b-shard -j 1 --image-size 32"
run_ok "a run into a folder" $S -q -o "$TMP/o" "$TMP/a.tar"
test -f "$TMP/o/.sa1b-shard.lock" && ! test -L "$TMP/o/.sa1b-shard.lock"
ok $? "it made the lock file, a regular file"
is "$(files "$TMP/o")" "a.shard " "nothing else"
run_ok "sa1b-verify the folder's shards" sa1b-verify "$TMP"/o/*.shard
run_ok "one .shard output" $S -q -o "$TMP/one.shard" "$TMP/a.tar"
test -f "$TMP/.sa1b-shard.lock"
ok $? "locks OUT's folder"
mkdir "$TMP/p" && ln -s "$TMP/elsewhere" "$TMP/p/.sa1b-shard.lock"
run_ok "a lock file that cannot be opened: the run goes on" $S -o "$TMP/p" "$TMP/a.tar"
is "$(grep -c "cannot lock '$TMP/p/.sa1b-shard.lock'" "$TMP/.err")" "1" "one line says so"
test ! -e "$TMP/elsewhere"
ok $? "the link is not followed"
is "$(shard_ids "$TMP/p/a.shard")" "1 2 3 " "the shard is written"
done_testing
