#!/bin/sh
# t1562: the finished parts of a run killed (SIGKILL) before its commit do
# not stay on disk forever.  Each is a complete shard under a temporary
# name ("a-00000.shard.partial.TTTTTT"); a later run removes it once the
# output under its final name holds the same bytes (its commit, or an
# earlier one, made it), saying so in one line, and keeps it, named in one
# line, while it may be the only copy of its data: no output beside it, one
# of other bytes (other options), or the partial's own file under the final
# name (a hard or symbolic link).  Before: every rerun said "left alone"
# and the killed run's parts, 150 MB each at --image-size 1024, stayed.
# One line a file: a part removed after the commit is not first called
# "left alone" (t1571).
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
command -v timeout >/dev/null || skip_all "no timeout"
mkfifo "$TMP/p" "$TMP/p.go" || skip_all "no mkfifo"
sa1b-synth --quiet -n 5 -W 120 -H 80 -m 4 -o "$TMP/a.tar" || exit 99
opts="-j 2 --image-size 32"

# killed DIR OPTS...: a run stopped before its commit, then killed with SIGKILL
killed() {
    d=$1
    shift
    SA1B_TEST_PAUSE="commit:1:$TMP/p" sa1b-shard -q $opts "$@" -o "$d" "$TMP/a.tar" 2>/dev/null & r=$!
    timeout 120 cat "$TMP/p" >/dev/null || echo "# the run did not stop"
    kill -KILL $r
    wait $r 2>/dev/null
}
partials() { ls "$1" | grep -c '\.partial\.'; }

# a killed run of three parts, then a rerun: the copies go after its commit
killed "$TMP/o" --max-images 2
is "$(partials "$TMP/o")" "3" "SIGKILL before the commit leaves three finished parts"
run_ok "a rerun" sa1b-shard -q $opts --max-images 2 -o "$TMP/o" "$TMP/a.tar"
is "$(files "$TMP/o")" "a-00000.shard a-00001.shard a-00002.shard " "leaves the set and nothing else"
is "$(grep -c "^sa1b-shard: '$TMP/o/a-0000[0-2]\.shard\.partial\.[A-Za-z0-9]\{6\}' is a complete shard .*: left alone$" "$TMP/.err")" \
    "0" "its first sweep keeps them without a word (no output beside them yet)"
is "$(grep -c "^sa1b-shard: removed '$TMP/o/a-0000\([0-2]\)\.shard\.partial\.[A-Za-z0-9]\{6\}', a copy of '$TMP/o/a-0000\1\.shard' (the same bytes) that an earlier run left under a temporary name$" "$TMP/.err")" \
    "3" "and after its commit one line for each copy removed, even with -q"
is "$(shard_ids "$TMP"/o/*.shard)" "1 2 3 4 5 " "the set has every image"

# other options: the killed run's parts are not copies of the outputs
killed "$TMP/x" --max-images 2
run_ok "a rerun with other options" sa1b-shard -q -j 2 --image-size 48 --max-images 2 -o "$TMP/x" "$TMP/a.tar"
is "$(partials "$TMP/x")" "3" "keeps the killed run's parts"
grep -q "a copy of" "$TMP/.err"
ok $((!$?)) "and removes none"
run_ok "which are whole shards still" sh -c 'for f in "$1"/*.partial.*; do sa1b-verify -q "$f" || exit 1; done' _ "$TMP/x"
run_ok "--force with the first options" sa1b-shard -q $opts --max-images 2 --force -o "$TMP/x" "$TMP/a.tar"
is "$(files "$TMP/x")" "a-00000.shard a-00001.shard a-00002.shard " "whose outputs are their copies: they go"

# one output file, no parts
mkdir "$TMP/s"
killed "$TMP/s/a.shard"
is "$(partials "$TMP/s")" "1" "a single-file output killed before its commit"
cp "$TMP/s"/a.shard.partial.* "$TMP/keep.shard"
run_ok "a rerun" sa1b-shard -q $opts -o "$TMP/s/a.shard" "$TMP/a.tar"
is "$(files "$TMP/s")" "a.shard " "removes the copy"
cmp -s "$TMP/s/a.shard" "$TMP/keep.shard"
ok $? "the output has the killed run's bytes"

# the partial's own file under the final name is not a copy of it
for link in "ln" "ln -s"; do
    rm -rf "$TMP/l" && mkdir "$TMP/l"
    killed "$TMP/l/a.shard"
    p=$(ls "$TMP"/l/a.shard.partial.*)
    $link "$p" "$TMP/l/a.shard"
    run_ok "$link: --skip-existing beside a link to the partial" sa1b-shard -q $opts --skip-existing -o "$TMP/l/a.shard" "$TMP/a.tar"
    test -f "$p" && cmp -s "$p" "$TMP/keep.shard"
    ok $? "$link: the partial is kept"
    grep_ok "^sa1b-shard: '$p' is a complete shard that an earlier run left under a temporary name \(it may be the only copy of its data\): left alone$" \
        "$TMP/.err" "$link: and named"
done
done_testing
