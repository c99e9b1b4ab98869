#!/bin/sh
# t0006: a message about an option names it with its dashes, in every
# program: each long option that takes a value, given one no program
# takes ('zz9x'), is refused or used without a message that names the
# option bare ('image-size: ...'; before: sa1b-train's --image-size,
# --patch, --enc-width, --enc-depth, --enc-heads, --dec-width, --dec-heads
# and --dec-depth said so); and sa1b-train given more than one argument
# after --data or --val (an unquoted pattern the shell expanded) says, in
# one line, that the option takes one quoted pattern (before: "unexpected
# argument 'b.shard'" alone).
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-train >/dev/null && command -v sa1b-shard >/dev/null || skip_all "programs not built"
mkdir "$TMP/w" && cd "$TMP/w" || exit 99

for o in image-size patch enc-width enc-depth enc-heads dec-width dec-heads dec-depth; do
    run_status 2 "sa1b-train --$o 0x: refused" sa1b-train --"$o" 0x --synthetic-batch 1 --out r
    grep_ok "^sa1b-train: --$o: '0x' is not an integer in [01]\.\.4096$" "$TMP/.err" "names --$o with its dashes"
done

# every program, every long option with a value
bare=""
for p in sa1b-shard sa1b-synth sa1b-rle sa1b-verify sa1b-inspect sa1b-export sa1b-loadbench sa1b-train; do
    command -v $p >/dev/null || continue
    for o in $($p --help 2>&1 | grep -oE -- '--[a-z][a-z0-9-]+[ =][A-Z]' | sed 's/[ =][A-Z]$//' | sort -u); do
        rm -rf "$TMP/w"/* 2>/dev/null
        timeout 60 $p "$o=zz9x" </dev/null >/dev/null 2>"$TMP/opt.err"
        n=${o#--}
        grep -E "(^|[^-])$n: " "$TMP/opt.err" | grep -vE -- "--$n: " >"$TMP/bare" && bare="$bare $p $o: $(head -1 "$TMP/bare");"
    done
done
is "$bare" "" "no message names an option without its dashes"

# an unquoted pattern after --data or --val
run_status 2 "sa1b-train --data a.shard b.shard (an expanded pattern): refused" \
    sa1b-train --data s/a.shard s/b.shard s/c.shard --out r
grep_ok "^sa1b-train: unexpected argument 's/b.shard' after --data 's/a.shard': --data takes one pattern, quoted so that the shell leaves it alone \(--data 'dir/\*\.shard'\)$" \
    "$TMP/.err" "says that --data takes one quoted pattern"
is "$(grep -c '^sa1b-train: ' "$TMP/.err")" "1" "in one line"
run_status 2 "--val=a.shard b.shard" sa1b-train --synthetic-batch 1 --val=v/a.shard v/b.shard --out r
grep_ok "^sa1b-train: unexpected argument 'v/b.shard' after --val 'v/a.shard': --val takes one pattern" "$TMP/.err" \
    "says it of --val"
run_status 2 "an extra argument elsewhere" sa1b-train --synthetic-batch 1 extra --out r
grep_ok "^sa1b-train: unexpected argument 'extra'$" "$TMP/.err" "is only unexpected"
done_testing
