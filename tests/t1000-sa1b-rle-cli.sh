#!/bin/sh
# t1000-sa1b-rle-cli.sh - sa1b-rle's command line: --help, --version, usage
# errors (exit 2), and --help and the man page naming the same options.
. "$top_srcdir/tests/test-lib.sh"

run_ok "--help exits 0" sa1b-rle --help
for c in info decode encode iou merge; do
    grep_ok "sa1b-rle $c" "$TMP/.out" "--help shows the $c command"
done
cp "$TMP/.out" "$TMP/help"
run_ok "--help after a command" sa1b-rle decode --help
run_ok "--version exits 0" sa1b-rle --version
grep_ok '^sa1b-rle \(sa1b\) ' "$TMP/.out" "--version names the program and package"

run_status 2 "no command" sa1b-rle
grep_ok 'Try .sa1b-rle --help.' "$TMP/.err" "usage error hints at --help"
run_status 2 "unknown command" sa1b-rle frobnicate
run_status 2 "unknown option" sa1b-rle decode --frobnicate
run_status 2 "missing option argument" sa1b-rle decode --size
run_status 2 "decode without --counts" sa1b-rle decode --size 3x4
run_status 2 "bad --size" sa1b-rle decode --size 3by4 --counts '<'
run_status 2 "bad --mode" sa1b-rle decode --size 3x4 --counts '<' --resize 2x2 --mode cubic
run_status 2 "--coverage without --mode area" sa1b-rle decode --size 3x4 --counts '<' --coverage
run_status 2 "option of another command" sa1b-rle iou --size 3x4 '3x4:<' '3x4:<'
run_status 2 "iou needs two masks" sa1b-rle iou '3x4:<'
run_status 2 "merge needs --union or --intersect" sa1b-rle merge '3x4:<' '3x4:<'
run_status 2 "mask argument without a size" sa1b-rle iou '<' '<'
run_status 2 "raw encode needs --size" sa1b-rle encode </dev/null

# every long option of --help is in the man page and the reverse
man="$SRC/man/sa1b-rle.1"
grep -o -- '--[a-z][a-z-]*' "$TMP/help" | sort -u >"$TMP/help-opts"
sed -n 's/^\.Fl -\([a-z][a-z-]*\).*/--\1/p; s/^\.It Fl [a-zA-Z] , Fl -\([a-z][a-z-]*\).*/--\1/p; s/^\.It Fl -\([a-z][a-z-]*\).*/--\1/p' "$man" |
    sort -u >"$TMP/man-opts"
diff "$TMP/help-opts" "$TMP/man-opts" >"$TMP/opts.diff"
ok $? "--help and sa1b-rle.1 list the same long options"
[ -s "$TMP/opts.diff" ] && sed 's/^/# /' "$TMP/opts.diff"
if command -v mandoc >/dev/null 2>&1; then
    mandoc -Tlint -W warning "$man" >"$TMP/lint" 2>&1
    ok $? "sa1b-rle.1 passes mandoc -Tlint"
    sed 's/^/# /' "$TMP/lint"
else
    skip 1 "mandoc not installed"
fi
done_testing
