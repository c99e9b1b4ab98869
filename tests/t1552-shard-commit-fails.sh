#!/bin/sh
# t1552: a commit that fails never leaves an input without a complete set.
# Before the old part 0 is removed, everything that can be checked is: a
# finished part that vanished (here removed while the run is paused just
# before its commit, SA1B_TEST_PAUSE=commit) stops the commit with the old
# set as it was, exit 3, and the summary counts no shard written.  Once the
# old part 0 is gone the new parts are never dropped: a stale part that
# cannot be removed (a sticky folder, the file another user's; as root
# only) is reported in one line, exit 3, and the new set is still put in
# place.  Before: the old part 0 was removed first, the rename failed, every
# new part was dropped and the summary said "3 shards written"; the
# unremovable stale file dropped the whole new set the same way.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
command -v timeout >/dev/null || skip_all "no timeout"
mkfifo "$TMP/p" "$TMP/p.go" || skip_all "no mkfifo"
sa1b-synth --quiet -n 6 -W 120 -H 80 -m 4 -o "$TMP/a.tar" || exit 99
mkdir "$TMP/b" && sa1b-synth --quiet -n 6 -W 120 -H 80 -m 4 -s 3 --first-id 100 -o "$TMP/b/a.tar" || exit 99
opts="-j 2 --image-size 32"

sa1b-shard -q $opts --max-images 2 -o "$TMP/o" "$TMP/a.tar" || exit 99
SA1B_TEST_PAUSE="commit:1:$TMP/p" sa1b-shard $opts --max-images 3 -o "$TMP/o" "$TMP/b/a.tar" 2>"$TMP/err" & r=$!
timeout 120 cat "$TMP/p" >/dev/null
ok $? "the run stops before its commit"
rm -f "$TMP"/o/a-00001.shard.partial.??????
timeout 120 sh -c ': >"$1"' _ "$TMP/p.go"
wait $r
is "$?" "3" "a finished part removed meanwhile: exit 3"
grep_ok "^sa1b-shard: '$TMP/o/a-00001\.shard\.partial\.[A-Za-z0-9]{6}', a finished part of '$TMP/b/a\.tar': No such file or directory: nothing of it put in place, the earlier output left as it was$" \
    "$TMP/err" "one line says so"
is "$(ls "$TMP/o" | tr '\n' ' ')" "a-00000.shard a-00001.shard a-00002.shard " "the old set is whole"
is "$(shard_ids "$TMP"/o/*.shard)" "1 2 3 4 5 6 " "with its images"
grep_ok " 0 shards written," "$TMP/err" "the summary counts no shard written"

# a stale part that cannot be removed: the new set goes in place all the same
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
    skip 6 "needs root and setpriv (a file of another user in a sticky folder)"
    done_testing
fi
chmod 755 "$TMP" && mkdir -m 1777 "$TMP/s" || exit 99
sa1b-shard -q $opts --max-images 2 -o "$TMP/s" "$TMP/a.tar" || exit 99
chown 65534 "$TMP/s/a-00000.shard" "$TMP/s/a-00001.shard" && chown 12345 "$TMP/s/a-00002.shard" || exit 99
chmod 755 "$TMP/b" && chmod 644 "$TMP/b/a.tar"
run_status 3 "a stale part another user owns: exit 3" \
    setpriv --reuid=65534 --regid=65534 --clear-groups sa1b-shard $opts --max-images 3 -o "$TMP/s" "$TMP/b/a.tar"
grep_ok "^sa1b-shard: cannot remove '$TMP/s/a-00002\.shard' \(left from an earlier run of this output\): Operation not permitted$" \
    "$TMP/.err" "one line names it"
is "$(ls "$TMP/s" | tr '\n' ' ')" "a-00000.shard a-00001.shard a-00002.shard " "the new parts are in place"
is "$(shard_ids "$TMP"/s/a-0000[01].shard)" "100 101 102 103 104 105 " "with the new images"
grep_ok " 2 shards written," "$TMP/.err" "the summary counts the two"
is "$(ls -a "$TMP/s" | grep -c partial)" "0" "no partial is left"

# the commit's one rename fails (strace injects EIO into the second rename,
# the writer's partial name being the first): exit 3, the part kept under
# its partial name, and the summary counts no image, mask or shard
if command -v strace >/dev/null &&
    strace -qq -o /dev/null -e trace=rename -e inject=rename:error=EIO:when=2 true 2>/dev/null; then
    mkdir "$TMP/rf"
    # (LeakSanitizer cannot run under ptrace)
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -o /dev/null \
        -e trace=rename,renameat,renameat2 -e inject=rename,renameat,renameat2:error=EIO:when=2 \
        sa1b-shard -q $opts --json-summary -o "$TMP/rf" "$TMP/a.tar" >"$TMP/rf.out" 2>"$TMP/rf.err"
    is "$?" "3" "the commit's rename fails: exit 3"
    grep_ok '^\{"images":0,"masks_kept":0,"masks_dropped":0,"skipped":0,"shards":0,' "$TMP/rf.out" \
        "the summary counts nothing written"
    is "$(ls "$TMP/rf" | grep -c '^a\.shard\.partial\.[A-Za-z0-9]*$')" "1" "the part is kept under its partial name"
else
    skip 3 "no strace that injects faults"
fi
done_testing
