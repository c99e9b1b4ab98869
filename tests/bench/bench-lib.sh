# bench-lib.sh - sourced by the trainer's shell benchmarks: the built tools
# first in PATH, and bench_workdir DIR, which sets $tmp to DIR (created,
# kept) or, DIR empty, to a temporary directory removed at exit.
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
PATH="$top_builddir/trainer:$top_builddir/shard-tools:$PATH"
bench_workdir() {
    if [ -n "$1" ]; then
        tmp=$1
        mkdir -p "$tmp"
    else
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
    fi
}
