# test-lib.sh - sourced by every tNNNN-*.sh tool test (git's t/ style).
#
# Provides: $TMP (a private temporary directory, removed at exit; kept when
# SA1B_KEEP_TMP is set), PATH with the built programs first, $SRC (source
# tree), $BUILD (build tree), $SHARED_DATA (../shared/data/sa1b-real when it
# exists, empty otherwise), and TAP helpers:
#   ok COND-STATUS DESC          ok $? "desc" after a command
#   run_ok DESC CMD...           passes when CMD exits 0
#   run_status N DESC CMD...     passes when CMD exits with status N
#   is GOT WANT DESC             string equality
#   grep_ok PATTERN FILE DESC    file contains an extended-regex match
#   skip N WHY / skip_all WHY / done_testing
#   mpi_env                      Open MPI's environment for a test's mpirun
# Tests print their own plan at the end (done_testing) unless they call plan.

set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
BUILD=$(cd "$top_builddir" && pwd)
SRC=$(cd "$top_srcdir" && pwd)
PATH="$BUILD:$BUILD/shard-tools:$BUILD/trainer:$PATH"
export PATH
LC_ALL=C
export LC_ALL

SHARED_DATA=""
for d in "$SRC/../shared/data/sa1b-real" "${SA1B_SHARED:-/nonexistent}/data/sa1b-real"; do
    if [ -d "$d" ]; then SHARED_DATA=$(cd "$d" && pwd); break; fi
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/sa1b-test.XXXXXX") || exit 99
if [ -z "${SA1B_KEEP_TMP:-}" ]; then
    trap 'rm -rf "$TMP"' EXIT
fi

# Open MPI as the tests run it: as root (CI), with copies through shared
# memory (no CMA in containers), and, under LeakSanitizer, its plugins kept
# loaded (so that their allocations can be named) and suppressed by name
# (not ours to report), unwinding in full to find the library behind each.
mpi_env() {
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    export OMPI_MCA_mca_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
    export PMIX_MCA_pdl_pdlopen_disable_dlclose=1
    export LSAN_OPTIONS="suppressions=$SRC/tests/lsan-mpi.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
}

test_n=0
test_failed=0
test_planned=""

plan() { test_planned=$1; echo "1..$1"; }

ok() {
    test_n=$((test_n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $test_n - $2"
    else
        echo "not ok $test_n - $2"
        test_failed=$((test_failed + 1))
    fi
}

run_ok() {
    desc=$1; shift
    "$@" >"$TMP/.out" 2>"$TMP/.err"
    rc=$?
    ok $rc "$desc"
    if [ $rc -ne 0 ]; then
        echo "# command: $*"; echo "# exit $rc"; sed 's/^/# stderr: /' "$TMP/.err" | head -20
    fi
    return $rc
}

run_status() {
    want=$1; desc=$2; shift 2
    "$@" >"$TMP/.out" 2>"$TMP/.err"
    rc=$?
    [ "$rc" -eq "$want" ]
    ok $? "$desc"
    if [ "$rc" -ne "$want" ]; then
        echo "# command: $*"; echo "# exit $rc, want $want"; sed 's/^/# stderr: /' "$TMP/.err" | head -20
    fi
}

is() {
    [ "$1" = "$2" ]
    ok $? "$3"
    [ "$1" = "$2" ] || { echo "# got:  '$1'"; echo "# want: '$2'"; }
}

grep_ok() {
    grep -Eq -- "$1" "$2"
    rc=$?
    ok $rc "$3"
    [ $rc -eq 0 ] || { echo "# no match for /$1/ in $2:"; head -5 "$2" | sed 's/^/#   /'; }
}

skip() {
    i=0
    while [ $i -lt "$1" ]; do
        test_n=$((test_n + 1)); echo "ok $test_n # SKIP $2"; i=$((i + 1))
    done
}

skip_all() { echo "1..0 # SKIP $1"; exit 77; }

# shard_ids SHARD...: the image ids the shards hold, sorted, on one line
shard_ids() { sa1b-loadbench -q --print-ids -b 1 -m 4 "$@" | awk '{print $3}' | sort -n | tr '\n' ' '; }
# files DIR: its file names on one line
files() { ls "$1" | tr '\n' ' '; }

done_testing() {
    [ -n "$test_planned" ] || echo "1..$test_n"
    [ "$test_failed" -eq 0 ]
    exit $?
}
