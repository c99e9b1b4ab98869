#!/bin/sh
# t1570: contrib/sa1b-stream.sh says nothing of the checksum mark a first
# download has not written yet: its standard error holds only its own
# "sa1b-stream.sh: ..." lines, none of the shell's "No such file or
# directory" about DIR/NAME.tar.sha256 (before: "line 278:
# st3/sa_000000.tar.sha256: No such file or directory", mark_hash opening
# the missing mark before quieting standard error); a rerun neither.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
command -v curl >/dev/null && command -v jq >/dev/null || skip_all "curl or jq missing"
C="$SRC/contrib"
cd "$TMP" || exit 99
for n in 0 1; do
    sa1b-synth --quiet -n 3 -W 160 -H 120 -m 5 -s $((n + 3)) --first-id $((n * 10 + 1)) -o "$TMP/sa_00000$n.tar" || exit 99
done
printf 'file_name\tcdn_link\r\n' >links.txt
for n in 0 1; do printf 'sa_00000%d.tar\tfile://%s/sa_00000%d.tar\r\n' $n "$TMP" $n >>links.txt; done

run_ok "a first download of two tars into st3/" "$C/sa1b-stream.sh" -t 1 -o st3 links.txt -- --image-size 32
test -s st3/sa_000000.shard && test -s st3/sa_000001.tar.sha256
ok $? "writes the shards and their marks"
grep -n 'No such file\|sha256' "$TMP/.err" >bad.txt
test ! -s bad.txt
ok $? "its standard error names no missing mark"
[ -s bad.txt ] && sed 's/^/# /' bad.txt
grep -v '^sa1b-stream.sh: ' "$TMP/.err" | grep -v '^sa1b-shard: ' >other.txt
test ! -s other.txt
ok $? "and holds only the programs' own lines"
[ -s other.txt ] && sed 's/^/# /' other.txt
run_ok "a rerun" "$C/sa1b-stream.sh" -t 1 -o st3 links.txt -- --image-size 32
is "$(grep -c 'complete shard exists, skipped$' "$TMP/.err")" "2" "skips both"
is "$(grep -vc 'complete shard exists, skipped$' "$TMP/.err")" "0" "saying nothing else"
rm st3/sa_000001.tar.sha256
run_ok "a rerun with one mark removed" "$C/sa1b-stream.sh" -t 1 -o st3 links.txt -- --image-size 32
grep -n 'No such file' "$TMP/.err" >bad.txt
test ! -s bad.txt
ok $? "names no missing mark either"
done_testing
