#!/bin/sh
# t1560: the contrib/ recipes for sharding SA-1B beyond one process: GNU
# parallel over a list of tars (local jobs and --sshlogin ":"), the Slurm
# array script (run with SLURM_ARRAY_TASK_ID set, no Slurm needed) and the
# stream from the link file (file:// URLs) give shards byte-identical to
# sequential sa1b-shard runs; failures are reported and redone on rerun;
# the scripts are shellcheck-clean and answer --help.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
C="$SRC/contrib"
cd "$TMP" || exit 99
for n in 0 1 2; do
    sa1b-synth --quiet -n 6 -W 160 -H 120 -m 5 -s $((n + 11)) -o "$TMP/sa_00000$n.tar" || exit 99
done
printf '%s\n' "$TMP/sa_000000.tar" "$TMP/sa_000001.tar" "$TMP/sa_000002.tar" >"$TMP/tars.txt"
opts="--image-size 32 --max-masks 3 --strategy quality"
for n in 0 1 2; do   # the reference: one sequential run per tar
    # shellcheck disable=SC2086
    sa1b-shard -q -j 1 $opts -o "$TMP/seq/" "$TMP/sa_00000$n.tar" || exit 99
done
same_as_seq() { # DIR DESC: DIR holds exactly the three sequential shards, byte for byte
    r=0
    for n in 0 1 2; do cmp -s "$TMP/seq/sa_00000$n.shard" "$1/sa_00000$n.shard" || r=1; done
    [ "$(find "$1" -name '*.shard' | wc -l)" -eq 3 ] || r=1
    ok $r "$2"
}

for s in sa1b-parallel.sh sa1b-slurm.sbatch sa1b-stream.sh; do
    "$C/$s" --help >"$TMP/help" 2>&1
    ok $? "$s --help: exit 0"
    grep_ok "^Usage: (sbatch --array=0-999 )?contrib/$s " "$TMP/help" "$s --help prints its usage"
    "$C/$s" --no-such-option >/dev/null 2>"$TMP/err"
    is "$?" "2" "$s: a usage error exits 2"
done
if command -v shellcheck >/dev/null; then
    run_ok "the contrib scripts are shellcheck-clean" shellcheck "$C/sa1b-parallel.sh" "$C/sa1b-slurm.sbatch" "$C/sa1b-stream.sh"
else
    skip 1 "shellcheck missing"
fi

# GNU parallel
if command -v parallel >/dev/null; then
    # shellcheck disable=SC2086
    run_ok "sa1b-parallel.sh: 3 tars, 3 jobs of 1 thread" "$C/sa1b-parallel.sh" -t 1 -J 3 -o "$TMP/par" "$TMP/tars.txt" -- $opts
    same_as_seq "$TMP/par" "its shards equal the sequential runs byte for byte"
    # shellcheck disable=SC2016
    run_ok "through --sshlogin (':' is this machine), the list on stdin" \
        sh -c '"$1" -S : -t 2 -J 2 -o "$2" - -- $3 <"$4"' sh "$C/sa1b-parallel.sh" "$TMP/par-ssh" "$opts" "$TMP/tars.txt"
    same_as_seq "$TMP/par-ssh" "the same shards"

    # a download cut short in the list: reported, then redone alone
    size=$(stat -c %s "$TMP/sa_000001.tar")
    mkdir "$TMP/cut" && cp "$TMP/sa_000000.tar" "$TMP/sa_000002.tar" "$TMP/cut/"
    head -c $((size / 2 + 100)) "$TMP/sa_000001.tar" >"$TMP/cut/sa_000001.tar"
    ls "$TMP"/cut/*.tar >"$TMP/cut.txt"
    # shellcheck disable=SC2086
    "$C/sa1b-parallel.sh" -o "$TMP/rerun" --joblog "$TMP/joblog" "$TMP/cut.txt" -- $opts 2>"$TMP/err"
    is "$?" "1" "a cut tar among them: exit 1"
    grep_ok "^sa1b-shard: '$TMP/cut/sa_000001.tar': input ends early" "$TMP/err" "sa1b-shard's line names it"
    grep_ok "^sa1b-parallel.sh: exit 1 \(host :\): .*sa_000001.tar$" "$TMP/err" "and the script's summary too"
    is "$(awk -F'\t' 'NR > 1' "$TMP/joblog" | wc -l)" "3" "--joblog keeps a line per tar"
    cp "$TMP/sa_000001.tar" "$TMP/cut/sa_000001.tar"
    ls -i "$TMP/rerun/sa_000000.shard" "$TMP/rerun/sa_000002.shard" >"$TMP/inodes1"
    # shellcheck disable=SC2086
    run_ok "the same command once the tar is whole: exit 0" "$C/sa1b-parallel.sh" -o "$TMP/rerun" "$TMP/cut.txt" -- $opts
    ls -i "$TMP/rerun/sa_000000.shard" "$TMP/rerun/sa_000002.shard" >"$TMP/inodes2"
    cmp -s "$TMP/inodes1" "$TMP/inodes2"
    ok $? "the complete shards were left alone"
    same_as_seq "$TMP/rerun" "and the set equals the sequential runs"
    run_status 3 "a list that cannot be read: exit 3" "$C/sa1b-parallel.sh" -o "$TMP/x" "$TMP/nonexistent"
    grep_ok "^sa1b-parallel.sh: cannot read '$TMP/nonexistent'$" "$TMP/.err" "in one line"
    # --joblog is truncated by GNU parallel: never LIST nor one of its tars
    cp "$TMP/tars.txt" "$TMP/keep.txt"
    run_status 2 "--joblog naming LIST: refused" "$C/sa1b-parallel.sh" -o "$TMP/jl" --joblog "$TMP/tars.txt" "$TMP/tars.txt"
    grep_ok "^sa1b-parallel.sh: --joblog '$TMP/tars.txt' is LIST \('$TMP/tars.txt'\): give another file$" "$TMP/.err" "in one line"
    run_status 2 "--joblog naming LIST given on standard input: refused" sh -c \
        '"$1" -o "$2" --joblog "$3" - <"$3"' _ "$C/sa1b-parallel.sh" "$TMP/jl" "$TMP/tars.txt"
    run_status 2 "--joblog naming a tar of LIST: refused" "$C/sa1b-parallel.sh" -o "$TMP/jl" --joblog "$TMP/sa_000001.tar" "$TMP/tars.txt"
    cmp -s "$TMP/tars.txt" "$TMP/keep.txt" && cmp -s "$TMP/sa_000001.tar" "$TMP/cut/sa_000001.tar"
    ok $? "both are left as they were"
else
    skip 20 "GNU parallel missing (Debian: parallel)"
fi

# Slurm array: task K shards line K+1
r=0
for k in 2 0 1; do
    # shellcheck disable=SC2086
    SLURM_ARRAY_TASK_ID=$k SLURM_CPUS_PER_TASK=2 "$C/sa1b-slurm.sbatch" "$TMP/tars.txt" "$TMP/slurm" $opts || r=1
done
ok $r "sa1b-slurm.sbatch: array tasks 2, 0, 1: exit 0"
same_as_seq "$TMP/slurm" "their shards equal the sequential runs"
SLURM_ARRAY_TASK_ID=3 "$C/sa1b-slurm.sbatch" "$TMP/tars.txt" "$TMP/slurm" >/dev/null 2>"$TMP/err"
is "$?" "2" "a task past the list's end: exit 2"
grep_ok "^sa1b-slurm.sbatch: task 3: '$TMP/tars.txt' has no line 4 \(3 lines\)$" "$TMP/err" "one line says so"
(unset SLURM_ARRAY_TASK_ID; "$C/sa1b-slurm.sbatch" "$TMP/tars.txt" "$TMP/slurm" >/dev/null 2>"$TMP/err")
is "$?" "2" "outside an array job: exit 2"

# streaming from SA-1B's link file (file:// URLs stand for the CDN's)
if command -v curl >/dev/null && command -v jq >/dev/null; then
    printf 'file_name\tcdn_link\r\n' >"$TMP/links.txt"   # as fetched: CRLF line ends
    for n in 0 1 2; do printf 'sa_00000%d.tar\tfile://%s/sa_00000%d.tar\r\n' $n "$TMP" $n >>"$TMP/links.txt"; done
    printf 'sa_000007.tar\tfile://%s/cut/half.tar\n' "$TMP" >>"$TMP/links.txt"
    printf 'sa_000008.tar\tfile://%s/nonexistent.tar\n' "$TMP" >>"$TMP/links.txt"
    head -c $((size / 2 + 100)) "$TMP/sa_000001.tar" >"$TMP/cut/half.tar"
    # shellcheck disable=SC2086
    run_ok "sa1b-stream.sh: three tars of the link file" "$C/sa1b-stream.sh" -t 2 -o "$TMP/stream" "$TMP/links.txt" \
        sa_000000 sa_000001.tar sa_000002 -- $opts
    same_as_seq "$TMP/stream" "their shards equal the sequential runs"
    (cd "$TMP" && sha256sum sa_000000.tar) >"$TMP/want.sha256"
    cmp -s "$TMP/want.sha256" "$TMP/stream/sa_000000.tar.sha256"
    ok $? "the SHA-256 of the streamed bytes is recorded in sha256sum's format"
    # shellcheck disable=SC2086
    run_ok "a rerun" "$C/sa1b-stream.sh" -o "$TMP/stream" "$TMP/links.txt" sa_000000 -- $opts
    grep_ok "^sa1b-stream.sh: 'sa_000000.tar': complete shard exists, skipped$" "$TMP/.err" "skips what is complete"
    cat "$TMP"/stream/*.tar.sha256 >"$TMP/SHA256SUMS"
    sed 's/^0/1/; t; s/^./0/' "$TMP/stream/sa_000002.tar.sha256" >"$TMP/bad.sums"   # one hex digit changed
    rm "$TMP/stream/sa_000000.shard"
    # shellcheck disable=SC2086
    run_ok "--sums: a download checked against the earlier run's checksums" \
        "$C/sa1b-stream.sh" --sums "$TMP/SHA256SUMS" -o "$TMP/stream" "$TMP/links.txt" sa_000000 -- $opts
    same_as_seq "$TMP/stream" "(its shard removed and streamed again) still identical"
    rm "$TMP/stream/sa_000002.shard"
    # shellcheck disable=SC2086
    run_status 3 "a wrong checksum: exit 3" "$C/sa1b-stream.sh" --sums "$TMP/bad.sums" -o "$TMP/stream" "$TMP/links.txt" sa_000002 -- $opts
    grep_ok "^sa1b-stream.sh: 'sa_000002.tar': SHA-256 [0-9a-f]{64}, but '$TMP/bad.sums' says [0-9a-f]{64}: no shard kept$" \
        "$TMP/.err" "one line gives both checksums"
    test ! -e "$TMP/stream/sa_000002.shard" && test ! -e "$TMP/stream/sa_000002.tar.sha256"
    ok $? "and neither shard nor checksum is kept"
    # shellcheck disable=SC2086
    run_status 3 "a download cut short: exit 3" "$C/sa1b-stream.sh" -o "$TMP/stream" "$TMP/links.txt" sa_000007 -- $opts
    grep_ok "^sa1b-stream.sh: 'sa_000007.tar': the download ended early: no shard kept$" "$TMP/.err" "one line says so"
    test -z "$(find "$TMP/stream" -name 'sa_000007*')"
    ok $? "nothing of it is kept"
    # a complete shard there before (made by sa1b-shard, no checksum mark) outlives a cut download
    # shellcheck disable=SC2086
    sa1b-shard -q --name sa_000007 $opts -o "$TMP/stream/" - <"$TMP/sa_000001.tar" &&
        cp "$TMP/stream/sa_000007.shard" "$TMP/s7.keep"
    ok $? "a complete shard of that name, made by sa1b-shard"
    # shellcheck disable=SC2086
    run_status 3 "the cut download again: exit 3" "$C/sa1b-stream.sh" -o "$TMP/stream" "$TMP/links.txt" sa_000007 -- $opts
    grep_ok "^sa1b-stream.sh: 'sa_000007.tar': the download ended early: the shard there before is kept, not marked done$" \
        "$TMP/.err" "one line says so"
    cmp -s "$TMP/s7.keep" "$TMP/stream/sa_000007.shard" && test ! -e "$TMP/stream/sa_000007.tar.sha256"
    ok $? "the shard is the one there before, unmarked (a rerun streams it again)"
    rm "$TMP/stream/sa_000007.shard"
    run_status 3 "a failed download: exit 3" "$C/sa1b-stream.sh" -o "$TMP/stream" "$TMP/links.txt" sa_000008
    grep_ok "^sa1b-stream.sh: 'sa_000008.tar': download failed \(curl exit [0-9]+\): no shard kept$" "$TMP/.err" "one line says so"
    run_status 2 "a name not in the link file: exit 2" "$C/sa1b-stream.sh" -o "$TMP/stream" "$TMP/links.txt" sa_000099
    grep_ok "^sa1b-stream.sh: '$TMP/links.txt' has no line for 'sa_000099.tar'$" "$TMP/.err" "one line says so"
    run_status 3 "not a link file: exit 3" "$C/sa1b-stream.sh" -o "$TMP/stream" "$TMP/tars.txt"
    grep_ok "^sa1b-stream.sh: '$TMP/tars.txt': not an SA-1B link file" "$TMP/.err" "one line says so"
    { printf 'file_name\tcdn_link\n'; printf 'sa_000000.tar file://%s/sa_000000.tar\n' "$TMP"; } >"$TMP/sp-links.txt"
    run_status 3 "a link file whose line has a space, not a TAB: exit 3" "$C/sa1b-stream.sh" -o "$TMP/stream" \
        "$TMP/sp-links.txt"
    grep_ok "^sa1b-stream.sh: '$TMP/sp-links.txt': line 2 is not \"NAME<TAB>URL\"" "$TMP/.err" "names the line"
    run_status 2 "-t 0: exit 2 before anything is streamed" "$C/sa1b-stream.sh" -t 0 -o "$TMP/stream" "$TMP/links.txt"
    # a mirror's NAME.tar.sha256 beside its tars, in DIR: the download must
    # match it, and it stays (before: removed, and the streamed bytes'
    # SHA-256 written in its place with exit 0)
    mkdir "$TMP/mir"
    printf '%064d  sa_000001.tar\n' 0 >"$TMP/mir/sa_000001.tar.sha256"
    # shellcheck disable=SC2086
    run_status 3 "a mirror's checksum file there that the download does not match: exit 3" \
        "$C/sa1b-stream.sh" -o "$TMP/mir" "$TMP/links.txt" sa_000001 -- $opts
    grep_ok "^sa1b-stream.sh: 'sa_000001.tar': SHA-256 [0-9a-f]{64}, but '$TMP/mir/sa_000001.tar.sha256' says 0{64}: no shard kept$" \
        "$TMP/.err" "one line gives both"
    is "$(cat "$TMP/mir/sa_000001.tar.sha256")" "$(printf '%064d  sa_000001.tar' 0)" "the file is left as it was"
    (cd "$TMP" && sha256sum sa_000001.tar) | awk '{ print toupper($1) "  " $2 }' >"$TMP/mir/sa_000001.tar.sha256"
    cp "$TMP/mir/sa_000001.tar.sha256" "$TMP/mir.sha256"
    # shellcheck disable=SC2086
    run_ok "one it matches (upper-case hex too)" "$C/sa1b-stream.sh" -o "$TMP/mir" "$TMP/links.txt" sa_000001 -- $opts
    grep_ok "^sa1b-stream.sh: 'sa_000001.tar': its shard is missing: streaming it again$" "$TMP/.err" \
        "(taken for the tar's mark, its shard missing)"
    # --sums as sha256sum -c reads it: CR line ends, upper case, through a pipe
    (cd "$TMP" && sha256sum sa_000000.tar) | awk '{ printf "%s  %s\r\n", toupper($1), $2 }' >"$TMP/up.sums"
    # shellcheck disable=SC2086
    mkfifo "$TMP/sums.fifo" && { cat "$TMP/up.sums" >"$TMP/sums.fifo" & }
    run_ok "--sums with CR line ends and upper-case hex, read from a pipe" \
        "$C/sa1b-stream.sh" --sums "$TMP/sums.fifo" -o "$TMP/mir2" "$TMP/links.txt" sa_000000 -- $opts
else
    skip 33 "curl or jq missing"
fi
done_testing
