#!/bin/sh
# t1551: a run removes as stale only files of the exact shapes of its
# temporaries (<part>.partial, .partial.tmp-XXXXXX, .partial.XXXXXX,
# .partial.XXXXXX.tmp-XXXXXX and the writer's .rows-XXXXXX after a
# .tmp-XXXXXX), never a user's file that merely starts so
# (a.shard.partial.notes); and the paths in its messages have no doubled
# slash when OUT ends in one ('out/a.shard', not 'out//a.shard').  Before,
# a.shard.partial.notes was removed "as a temporary of an earlier run".
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
sa1b-synth --quiet -n 3 -W 120 -H 80 -m 4 -o "$TMP/a.tar" || exit 99
opts="-j 2 --image-size 32"
mkdir "$TMP/t1"
for f in a.shard.partial.notes a.shard.partial.Ab12C a.shard.partial.Ab12Cde a.shard.partial.Ab1-Cd \
    a.shard.partial.tmp-abcde a.shard.partialX a.shard.partial.Ab12Cd.tmp-xY12zz.old; do
    echo "mine" >"$TMP/t1/$f"
done
for f in a.shard.partial a.shard.partial.tmp-abc123 a.shard.partial.Ab12Cd a.shard.partial.Ab12Cd.tmp-xY12zz \
    a.shard.partial.Ab12Cd.tmp-xY12zz.rows-QQ12qq; do
    : >"$TMP/t1/$f"
done
run_ok "a run beside files named like its temporaries" sa1b-shard $opts -o "$TMP/t1" "$TMP/a.tar"
is "$(ls "$TMP/t1" | tr '\n' ' ')" "a.shard a.shard.partial.Ab1-Cd a.shard.partial.Ab12C a.shard.partial.Ab12Cd.tmp-xY12zz.old a.shard.partial.Ab12Cde a.shard.partial.notes a.shard.partial.tmp-abcde a.shard.partialX " \
    "only the five of a temporary's shape are removed"
is "$(grep -c "a temporary of an earlier run" "$TMP/.err")" "5" "one line each"
is "$(cat "$TMP/t1/a.shard.partial.notes")" "mine" "the user's notes are intact"
# --max-images: the parts' temporaries, the same shapes
mkdir "$TMP/t2" && echo "mine" >"$TMP/t2/a-00001.shard.partial.notes" && : >"$TMP/t2/a-00001.shard.partial.Zz09Yy"
run_ok "with --max-images" sa1b-shard $opts --max-images 2 -o "$TMP/t2" "$TMP/a.tar"
is "$(ls "$TMP/t2" | tr '\n' ' ')" "a-00000.shard a-00001.shard a-00001.shard.partial.notes " \
    "the part's stale temporary goes, the notes stay"

# no doubled slash in the paths of messages
mkdir "$TMP/sub"
sa1b-shard -q $opts --max-images 2 -o "$TMP/sub/" "$TMP/a.tar" || exit 99
: >"$TMP/sub/a.shard.partial"
run_ok "OUT with a trailing slash" sa1b-shard $opts -o "$TMP/sub/" "$TMP/a.tar"
grep_ok "^sa1b-shard: removed '$TMP/sub/a-00001.shard', left from an earlier run of this output$" "$TMP/.err" \
    "a removed part is named with one slash"
grep_ok "^sa1b-shard: removed '$TMP/sub/a.shard.partial', a temporary" "$TMP/.err" "a stale temporary too"
grep -q "//" "$TMP/.err"
ok $((!$?)) "no message has a doubled slash"
(cd "$TMP/sub" && sa1b-shard $opts --max-images 2 -o ./ "$TMP/a.tar") >"$TMP/.out" 2>"$TMP/.err"
grep_ok "^sa1b-shard: removed '\./a\.shard', left from an earlier run of this output$" "$TMP/.err" "-o ./ gives './a.shard'"
done_testing
