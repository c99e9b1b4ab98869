#!/bin/sh
# t1547: an input without any member is no silent success.  A file of zeros
# (a preallocated download that never got its data: 10240 bytes, or a single
# 512-byte block) and GNU tar's empty archive, which looks the same, give
# one line "no member: an empty archive or a file of zeros", are counted
# like an input cut short (inputs_cut_short, exit 1, an empty shard that
# sa1b-verify calls incomplete; --strict: exit 3, nothing written), from a
# path and from a pipe, plain or compressed.  So does a tar whose members
# are not a sample's ("no sample: ...").  An empty file stays fatal.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
head -c 10240 /dev/zero >"$TMP/zeros.tar"
head -c 512 /dev/zero >"$TMP/z1.tar"
tar -cf "$TMP/empty.tar" --files-from /dev/null || exit 99
inputs="zeros.tar z1.tar empty.tar"
if command -v gzip >/dev/null; then gzip -c "$TMP/zeros.tar" >"$TMP/zeros.tar.gz"; inputs="$inputs zeros.tar.gz"; fi
if command -v xz >/dev/null; then xz -c "$TMP/z1.tar" >"$TMP/z1.tar.xz"; inputs="$inputs z1.tar.xz"; fi
opts="-j 2 --image-size 32"
for f in $inputs; do
    rm -f "$TMP/o.shard"
    run_status 1 "$f: exit 1" sa1b-shard $opts --json-summary -o "$TMP/o.shard" "$TMP/$f"
    grep_ok "^sa1b-shard: '$TMP/$f': no member: an empty archive or a file of zeros$" "$TMP/.err" "$f: one line says so"
    is "$(grep -c . "$TMP/.err")" 2 "$f: that line and the summary line, nothing else"
    grep_ok '"images":0,.*"inputs_cut_short":1' "$TMP/.out" "$f: counted as an input cut short"
    run_status 4 "$f: sa1b-verify calls its shard incomplete" sa1b-verify -q "$TMP/o.shard"
    sa1b-shard $opts -q -o "$TMP/p.shard" - <"$TMP/$f" 2>"$TMP/.err"
    is "$?" 1 "$f through a pipe: exit 1"
    grep_ok "^sa1b-shard: standard input: no member: an empty archive or a file of zeros$" "$TMP/.err" \
        "$f through a pipe: says so"
    run_status 3 "$f, --strict: exit 3" sa1b-shard $opts -q --strict -o "$TMP/s.shard" "$TMP/$f"
    grep_ok "no member" "$TMP/.err" "$f, --strict: says why"
    [ ! -e "$TMP/s.shard" ] && [ -z "$(ls "$TMP" | grep '^s.shard')" ]
    ok $? "$f, --strict: nothing written"
    sa1b-shard $opts -q --strict -o "$TMP/s.shard" - <"$TMP/$f" 2>/dev/null
    is "$?" 3 "$f, --strict through a pipe: exit 3"
done
# a complete output is not replaced by the shard of an input without members
sa1b-synth --quiet -n 2 -W 64 -H 48 -m 2 -o "$TMP/k.tar" || exit 99
sa1b-shard $opts -q -o "$TMP/k.shard" "$TMP/k.tar" || exit 99
cp "$TMP/k.shard" "$TMP/k.orig"
cp "$TMP/zeros.tar" "$TMP/k.tar"
run_status 1 "the input became zeros: exit 1" sa1b-shard $opts -q -o "$TMP/k.shard" "$TMP/k.tar"
cmp -s "$TMP/k.orig" "$TMP/k.shard"
ok $? "the complete shard is kept"
# members, but not one of a sample (a tar of other files, of a folder of
# upper-case names): no silent success either, one line, handled alike
mkdir -p "$TMP/other/sub" || exit 99
echo hello >"$TMP/other/README"
cp "$TMP/k.orig" "$TMP/other/sub/sa_1.JPG" && echo '{}' >"$TMP/other/sub/sa_1.JSON" || exit 99
(cd "$TMP/other" && tar -cf "$TMP/other.tar" README sub) || exit 99
rm -f "$TMP/o.shard"
run_status 1 "a tar without a sample: exit 1" sa1b-shard $opts --json-summary -o "$TMP/o.shard" "$TMP/other.tar"
grep_ok "^sa1b-shard: '$TMP/other.tar': no sample: not one member is named sa_<id>\\.jpg or sa_<id>\\.json$" \
    "$TMP/.err" "a tar without a sample: one line says so"
is "$(grep -c . "$TMP/.err")" 2 "a tar without a sample: that line and the summary line, nothing else"
grep_ok '"images":0,.*"inputs_cut_short":1' "$TMP/.out" "a tar without a sample: counted as an input cut short"
run_status 4 "a tar without a sample: sa1b-verify calls its shard incomplete" sa1b-verify -q "$TMP/o.shard"
sa1b-shard $opts -q -o "$TMP/p.shard" - <"$TMP/other.tar" 2>"$TMP/.err"
is "$?" 1 "a tar without a sample through a pipe: exit 1"
grep_ok "^sa1b-shard: standard input: no sample" "$TMP/.err" "a tar without a sample through a pipe: says so"
run_status 3 "a tar without a sample, --strict: exit 3" sa1b-shard $opts -q --strict -o "$TMP/s.shard" "$TMP/other.tar"
[ ! -e "$TMP/s.shard" ]; ok $? "a tar without a sample, --strict: nothing written"
cp "$TMP/other.tar" "$TMP/k.tar"
run_status 1 "the input became a tar without a sample: exit 1" sa1b-shard $opts -q -o "$TMP/k.shard" "$TMP/k.tar"
cmp -s "$TMP/k.orig" "$TMP/k.shard"
ok $? "the complete shard is kept"
: >"$TMP/nothing.tar"
run_status 3 "an empty file: exit 3" sa1b-shard $opts -q -o "$TMP/n.shard" "$TMP/nothing.tar"
grep_ok "^sa1b-shard: '$TMP/nothing.tar': empty input: not a tar archive$" "$TMP/.err" "an empty file: says so"
done_testing
