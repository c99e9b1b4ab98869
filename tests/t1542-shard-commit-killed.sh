#!/bin/sh
# t1542: a run killed (SIGKILL) while it puts a new set of parts in place
# over an older complete set never leaves a mix that looks complete: the
# old part 0 goes before any new part is renamed, so at every instant
# either one set is whole or part 0 is absent, and --skip-existing redoes
# the input.  A SIGTERM there waits until the new set is whole: the parts
# not yet renamed may be the only copy of their images (standard input),
# and the old set is already broken; nor does a closed standard error.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
sa1b-synth --quiet -n 20 -W 120 -H 80 -m 4 -s 1 -o "$TMP/old.tar" || exit 99
# new content of another size under the same name
sa1b-synth --quiet -n 20 -W 120 -H 80 -m 6 -s 9 --first-id 1000 -o "$TMP/new.tar" || exit 99
opts="-j 2 --image-size 32 --max-images 5"
old_ids=$(seq 1 20 | tr '\n' ' ')
new_ids=$(seq 1000 1019 | tr '\n' ' ')
for k in 1 2 3 4; do
    rm -rf "$TMP/y.tar" "$TMP/mx"
    cp "$TMP/old.tar" "$TMP/y.tar"
    sa1b-shard -q $opts -o "$TMP/mx" "$TMP/y.tar" || exit 99
    cp "$TMP/new.tar" "$TMP/y.tar"
    SA1B_TEST_KILL=commit:$k:kill sa1b-shard -q $opts -o "$TMP/mx" "$TMP/y.tar" 2>/dev/null
    is "$?" "137" "commit:$k: SIGKILL during the commit"
    if [ -e "$TMP/mx/y-00000.shard" ]; then
        got="part 0 present: $(shard_ids "$TMP"/mx/y-*.shard)"
    else
        got="part 0 absent"
    fi
    sa1b-shard $opts --skip-existing -o "$TMP/mx" "$TMP/y.tar" 2>"$TMP/err"
    rc=$?
    if [ $k -lt 4 ]; then
        is "$got" "part 0 absent" "commit:$k: no part 0, the mark of a complete set"
        is "$rc" "0" "commit:$k: --skip-existing reruns"
        grep -q "complete output exists, skipped" "$TMP/err"
        ok $((! $?)) "commit:$k: without calling the mix complete"
    else # part 0, renamed last, completes the new set
        is "$got" "part 0 present: $new_ids" "commit:$k: the new set is whole"
        is "$rc" "0" "commit:$k: --skip-existing"
        grep_ok "complete output exists, skipped" "$TMP/err" "commit:$k: takes it as complete"
    fi
    is "$(shard_ids "$TMP"/mx/y-*.shard)" "$new_ids" "commit:$k: then the set holds the new images, each once"
done
# SIGTERM during the commit, the new set from standard input (read once):
# the signal waits for the last rename, then ends the run (143); every new
# image is in place, no temporary is left
for k in 1 3; do
    rm -rf "$TMP/mx"
    sa1b-shard -q $opts -o "$TMP/mx" "$TMP/old.tar" || exit 99
    SA1B_TEST_KILL=commit:$k sa1b-shard -q $opts --name old -o "$TMP/mx" - <"$TMP/new.tar" 2>/dev/null
    is "$?" "143" "stdin, SIGTERM at commit:$k: dies of it"
    is "$(shard_ids "$TMP"/mx/old-*.shard)" "$new_ids" "stdin, SIGTERM at commit:$k: the new set is whole"
    is "$(ls "$TMP/mx" | grep -c partial)" "0" "stdin, SIGTERM at commit:$k: no temporary left"
done
# one output file: SIGTERM between the old file's removal and the rename
# (deferred the same way) leaves the new shard
rm -f "$TMP/one.shard"
sa1b-shard -q -j 2 --image-size 32 -o "$TMP/one.shard" "$TMP/old.tar" || exit 99
SA1B_TEST_KILL=commit:1 sa1b-shard -q -j 2 --image-size 32 -o "$TMP/one.shard" - <"$TMP/new.tar" 2>/dev/null
is "$?" "143" "one output from stdin, SIGTERM at the commit: dies of it"
is "$(shard_ids "$TMP/one.shard")" "$new_ids" "the new shard is in place"
# a reader of standard error that went away (| tee killed by the same
# Ctrl-C): the window's lines ("removed ..., left from an earlier run")
# fail to be written, and never end the run there (SIGPIPE is ignored)
rm -rf "$TMP/mx"
sa1b-shard -q -j 2 --image-size 32 --max-images 2 -o "$TMP/mx" "$TMP/old.tar" || exit 99 # 10 parts
{ sa1b-shard -q $opts --name old -o "$TMP/mx" - <"$TMP/new.tar" 2>&1 >/dev/null; echo $? >"$TMP/pipe.rc"; } |
    (exec 0<&-; sleep 1)
is "$(cat "$TMP/pipe.rc")" "0" "standard error a closed pipe: the run ends normally"
is "$(shard_ids "$TMP"/mx/old-*.shard)" "$new_ids" "and the new set is whole"
is "$(ls "$TMP/mx" | grep -c partial)" "0" "no temporary left"
# killed before anything is renamed (after the last part finished): the old
# set stays whole and is still taken as it was
rm -rf "$TMP/mx" && cp "$TMP/old.tar" "$TMP/y.tar"
sa1b-shard -q $opts -o "$TMP/mx" "$TMP/y.tar" || exit 99
cp "$TMP/new.tar" "$TMP/y.tar"
SA1B_TEST_KILL=part:4 sa1b-shard -q $opts -o "$TMP/mx" "$TMP/y.tar" 2>/dev/null
is "$?" "143" "killed before the commit"
is "$(shard_ids "$TMP"/mx/y-*.shard)" "$old_ids" "the old set is whole"
is "$(ls "$TMP/mx" | grep -c partial)" "0" "no temporary left"
done_testing
