#!/bin/sh
# t1571: the rerun of a sa1b-shard run killed (SIGKILL) before its commit
# says one thing of each file it finds: a finished part that its commit
# turns into a copy of the output is named once, as removed (before: six
# lines for three parts, each first "a complete shard ... left alone",
# then "removed ... a copy of ..."); parts that stay (the rerun had other
# options) are named once each, as left alone; and --skip-existing, which
# skips the input, names each part it keeps once too.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
command -v timeout >/dev/null || skip_all "no timeout"
mkfifo "$TMP/p" "$TMP/p.go" || skip_all "no mkfifo"
sa1b-synth --quiet -n 5 -W 120 -H 80 -m 4 -o "$TMP/a.tar" || exit 99
opts="-j 2 --image-size 32 --max-images 2"
killed() { # DIR: a run of three parts stopped before its commit, then killed
    # shellcheck disable=SC2086
    SA1B_TEST_PAUSE="commit:1:$TMP/p" sa1b-shard -q $opts -o "$1" "$TMP/a.tar" 2>/dev/null & r=$!
    timeout 120 cat "$TMP/p" >/dev/null || echo "# the run did not stop"
    kill -KILL $r
    wait $r 2>/dev/null
}
# once ERRFILE DESC: every file a line names is named by that line alone
once() {
    grep -oE "'[^']*\.partial\.[A-Za-z0-9]{6}'" "$1" | sort | uniq -d >"$TMP/twice"
    test ! -s "$TMP/twice"
    ok $? "$2"
    [ -s "$TMP/twice" ] && sed 's/^/# named twice: /' "$TMP/twice"
}

killed "$TMP/o"
is "$(ls "$TMP/o" | grep -c '\.partial\.')" "3" "a killed run leaves three finished parts"
# shellcheck disable=SC2086
run_ok "the rerun" sa1b-shard -q $opts -o "$TMP/o" "$TMP/a.tar"
once "$TMP/.err" "names each part once"
is "$(grep -c "^sa1b-shard: removed '$TMP/o/a-0000[0-2]\.shard\.partial\.[A-Za-z0-9]\{6\}', a copy of " "$TMP/.err")" "3" \
    "each as removed, a copy of its output"
is "$(wc -l <"$TMP/.err" | tr -d ' ')" "3" "and says nothing else"
is "$(files "$TMP/o")" "a-00000.shard a-00001.shard a-00002.shard " "which is all that is left"

killed "$TMP/x"
run_ok "a rerun with other options" sa1b-shard -q -j 2 --image-size 48 --max-images 2 -o "$TMP/x" "$TMP/a.tar"
once "$TMP/.err" "names each part once"
is "$(grep -c "is a complete shard that an earlier run left under a temporary name (it may be the only copy of its data): left alone$" "$TMP/.err")" \
    "3" "each as left alone"
grep -q "removed" "$TMP/.err"
ok $((!$?)) "none as removed"
# shellcheck disable=SC2086
run_ok "--skip-existing over the set of those options" sa1b-shard -q -j 2 --image-size 48 --max-images 2 --skip-existing -o "$TMP/x" "$TMP/a.tar"
is "$(grep -c ": left alone$" "$TMP/.err")" "3" "names each kept part once"
once "$TMP/.err" "and no part twice"
done_testing
