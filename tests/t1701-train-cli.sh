#!/bin/sh
# t1701: sa1b-train's command line: --help, --version, usage errors (exit 2),
# features not available yet fail cleanly, --help agrees with the man page.
. "$top_srcdir/tests/test-lib.sh"
run_ok "--help" sa1b-train --help
grep_ok '^Usage: sa1b-train' "$TMP/.out" "--help prints the usage"
cp "$TMP/.out" "$TMP/help"
run_ok "--version" sa1b-train --version
grep_ok '^sa1b-train \(sa1b\)' "$TMP/.out" "--version names the program"
run_status 2 "unknown option" sa1b-train --bogus
run_status 2 "bad --config" sa1b-train --config huge --out "$TMP/x" --synthetic-batch 1
grep_ok "tiny, small or base" "$TMP/.err" "the error names the choices"
run_status 2 "bad --batch" sa1b-train --batch 0 --out "$TMP/x" --synthetic-batch 1
run_status 2 "inconsistent model (E % H)" sa1b-train --config tiny --enc-heads 3 --out "$TMP/x" --synthetic-batch 1
run_status 2 "training without --out" sa1b-train --synthetic-batch 1
run_status 2 "training without data" sa1b-train --out "$TMP/x"
run_status 3 "--data matching no shard" sa1b-train --out "$TMP/x" --data "$TMP/none/*.shard"
grep_ok "^sa1b-train: --data: " "$TMP/.err" "the error names the option"
run_status 3 "--backend cuda without a GPU (or without CUDA built)" sa1b-train --backend cuda --out "$TMP/x" --synthetic-batch 1
grep_ok "^sa1b-train: --backend cuda: " "$TMP/.err" "one line naming the backend"
run_status 2 "--tf32 with the CPU backend" sa1b-train --tf32 --out "$TMP/x" --synthetic-batch 1
grep_ok "^sa1b-train: --tf32 is for --backend cuda" "$TMP/.err" "the error says which backend it is for"
run_status 3 "--tf32 --backend cuda without a GPU: the backend's line" sa1b-train --tf32 --backend cuda --out "$TMP/x" \
    --synthetic-batch 1
# an empty path is a usage error naming the option, never a path ('' +
# "/latest" read the root's latest), and nothing is written
cd "$TMP" || exit 99
for opt in --out --resume --init --data --val --dump-step --eval-only; do
    case $opt in
    --out | --resume | --dump-step | --eval-only) rest="--synthetic-batch 1" ;;
    *) rest="--out $TMP/e --synthetic-batch 1" ;;
    esac
    run_status 2 "$opt ''" sa1b-train $opt '' $rest
    grep_ok "^sa1b-train: $opt: the path is empty$" "$TMP/.err" "$opt '': the line names the option"
done
test ! -e "$TMP/e"
ok $? "(no folder was created)"
cd - >/dev/null || exit 99
# every long option of --help is in the man page and vice versa
sed -n 's/^ *\(-., \)\{0,1\}\(--[a-z-]*\).*/\2/p' "$TMP/help" | sort -u >"$TMP/help.opts"
grep -o -- '--[a-z-]*' "$TMP/help" | sort -u >"$TMP/help.all"
grep -o 'Fl \{0,1\}-[a-z-]*' "$SRC/man/sa1b-train.1" | sed 's/Fl *-/--/; s/^---/--/' | sort -u >"$TMP/man.opts"
missing=$(comm -23 "$TMP/help.all" "$TMP/man.opts" | tr '\n' ' ')
is "$missing" "" "every option of --help is documented in sa1b-train.1"
extra=$(comm -13 "$TMP/help.all" "$TMP/man.opts" | tr '\n' ' ')
is "$extra" "" "every option of sa1b-train.1 is in --help"
if command -v mandoc >/dev/null 2>&1; then
    mandoc -Tlint -W warning "$SRC/man/sa1b-train.1" >"$TMP/lint" 2>&1
    ok $? "man page passes mandoc -Tlint"
    sed 's/^/# /' "$TMP/lint"
fi
done_testing
