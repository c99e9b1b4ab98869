#!/bin/sh
# Every man page passes mandoc -Tlint with no warning.
. "$top_srcdir/tests/test-lib.sh"
command -v mandoc >/dev/null 2>&1 || skip_all "mandoc not installed"
for page in "$SRC"/man/*.[0-9]; do
    mandoc -Tlint -W warning "$page" > "$TMP/lint" 2>&1
    # cross references to our own pages are fine even when not installed
    grep -v 'referenced manual not found' "$TMP/lint" | grep -v '^$' > "$TMP/lint2"
    [ ! -s "$TMP/lint2" ]
    ok $? "mandoc -Tlint $(basename "$page")"
    sed 's/^/# /' "$TMP/lint2"
done
done_testing
