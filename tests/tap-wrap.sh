#!/bin/sh
# tap-wrap.sh - runs one test for automake's TAP driver.  A test that cannot
# run here prints "1..0 # SKIP why" and exits 77 (the autotools convention);
# the TAP driver would call any non-zero status an error, so 77 becomes 0.
"$@"
rc=$?
[ "$rc" -eq 77 ] && exit 0
exit "$rc"
