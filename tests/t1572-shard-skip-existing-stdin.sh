#!/bin/sh
# t1572: sa1b-shard --skip-existing with standard input ('-') shards it
# and says in one line, with -q too, that the option does not apply to
# standard input (before: ignored without a word); with tars beside it,
# they are skipped as usual; without --skip-existing nothing is said.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
sa1b-synth --quiet -n 2 -W 120 -H 80 -m 3 -o "$TMP/a.tar" || exit 99
cp "$TMP/a.tar" "$TMP/b.tar"
sa1b-shard -q --image-size 32 -o "$TMP/o/" "$TMP/b.tar" "$TMP/a.tar" || exit 99
run_ok "--skip-existing -o DIR/ - (standard input)" sh -c 'sa1b-shard -q --image-size 32 --skip-existing -o "$1/o/" - <"$1/a.tar"' _ "$TMP"
is "$(cat "$TMP/.err")" "sa1b-shard: '-': --skip-existing does not apply to standard input (a stream is not compared with its output): sharding it" \
    "one line says so, with -q"
run_ok "with a tar before it" sh -c 'sa1b-shard --image-size 32 --skip-existing -o "$1/o/" "$1/b.tar" - <"$1/a.tar"' _ "$TMP"
grep_ok "^sa1b-shard: '$TMP/b.tar': complete output exists, skipped$" "$TMP/.err" "the tar is skipped"
is "$(grep -c "does not apply to standard input" "$TMP/.err")" "1" "standard input is named once"
run_ok "without --skip-existing" sh -c 'sa1b-shard -q --image-size 32 --force -o "$1/o/" - <"$1/a.tar"' _ "$TMP"
is "$(cat "$TMP/.err")" "" "nothing is said"
done_testing
