#!/bin/sh
# t1561: the contrib/ recipes never let two tars write one shard, and
# sa1b-stream.sh redoes what is not done: a LIST with two tars of one output
# name (in different folders, or .tar against .tgz) is refused, exit 2,
# before anything is written, by sa1b-parallel.sh (file and standard input)
# and by every task of sa1b-slurm.sbatch (and its --check); a link file with
# one name twice or a NAME given twice by sa1b-stream.sh.  A stream rerun
# with other sa1b-shard options shards the tar again (the same options
# skip it); a run killed after the shard was put in place but before the
# checksum mark (SA1B_STREAM_TEST_KILL=shard) is streamed again on rerun; a
# wrong checksum with --sums is found before anything is put in place; a
# mark that disagrees with --sums is not taken for done, and the shard
# there is kept, unmarked, when the new download has the wrong checksum
# too (sa1b-shard writes into a folder of its own, whose shards go in place
# only once every check passed; before, the shard there was replaced, then
# the new one removed: nothing was left).  --sums naming DIR's own mark of
# a tar streamed again is refused (it was removed first); a run signalled
# while it puts the parts in place leaves a whole set (SIGTERM) or its
# folder with the parts not yet in place (SIGKILL), left alone by later
# runs until the shards in place are its (before, both sets were lost).
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
C="$SRC/contrib"
cd "$TMP" || exit 99
mkdir d1 d2 || exit 99
sa1b-synth --quiet -n 3 -W 160 -H 120 -m 5 -s 1 -o "$TMP/d1/sa.tar" || exit 99
sa1b-synth --quiet -n 3 -W 160 -H 120 -m 5 -s 2 --first-id 10 -o "$TMP/d2/sa.tar" || exit 99
cp "$TMP/d2/sa.tar" "$TMP/d2/sa.tgz" || exit 99   # only the name counts
printf '%s\n' "$TMP/d1/sa.tar" "$TMP/d2/sa.tar" >"$TMP/dup.txt"
printf '%s\n' "$TMP/d2/sa.tar" "$TMP/d1/sa.tgz" >"$TMP/dup2.txt"
nothing_in() { # DIR DESC: DIR holds no shard (or does not exist)
    test -z "$(find "$1" -name '*.shard' 2>/dev/null)"
    ok $? "$2"
}

# GNU parallel
if command -v parallel >/dev/null; then
    run_status 2 "sa1b-parallel.sh: two tars named sa.tar in LIST: exit 2" \
        "$C/sa1b-parallel.sh" -t 1 -J 2 -o "$TMP/par" "$TMP/dup.txt" -- --image-size 32
    grep_ok "^sa1b-parallel.sh: '$TMP/dup.txt': lines 1 and 2, '$TMP/d1/sa.tar' and '$TMP/d2/sa.tar', would both write 'sa.shard'" \
        "$TMP/.err" "one line names both"
    is "$(wc -l <"$TMP/.err")" "1" "and only that line"
    nothing_in "$TMP/par" "nothing is written"
    # shellcheck disable=SC2016
    run_status 2 "sa.tar and sa.tgz, LIST on standard input: exit 2" \
        sh -c '"$1" -t 1 -J 2 -o "$2" - -- --image-size 32 <"$3"' sh "$C/sa1b-parallel.sh" "$TMP/par" "$TMP/dup2.txt"
    grep_ok "^sa1b-parallel.sh: standard input: lines 1 and 2, '$TMP/d2/sa.tar' and '$TMP/d1/sa.tgz', would both write 'sa.shard'" \
        "$TMP/.err" "one line names both"
    nothing_in "$TMP/par" "nothing is written"
else
    skip 7 "GNU parallel missing (Debian: parallel)"
fi

# Slurm: every task refuses the list, none writes
r=0
for k in 0 1; do
    SLURM_ARRAY_TASK_ID=$k "$C/sa1b-slurm.sbatch" "$TMP/dup.txt" "$TMP/slurm" --image-size 32 >/dev/null 2>"$TMP/err$k"
    [ $? -eq 2 ] || r=1
done
ok $r "sa1b-slurm.sbatch: tasks 0 and 1 over a list with two sa.tar: exit 2"
grep_ok "^sa1b-slurm.sbatch: '$TMP/dup.txt': lines 1 and 2, '$TMP/d1/sa.tar' and '$TMP/d2/sa.tar', would both write 'sa.shard'" \
    "$TMP/err0" "one line names both"
# a list with an empty line or Windows line ends: refused before anything
# runs (before: GNU parallel passed '' and failed a run; an array job of
# CRLF lines failed every task after --check said yes)
printf '%s\n\n' "$TMP/d1/sa.tar" >"$TMP/blank.txt"
printf '%s\r\n' "$TMP/d1/sa.tar" >"$TMP/crlf.txt"
run_status 2 "sa1b-slurm.sbatch --check: an empty line" "$C/sa1b-slurm.sbatch" --check "$TMP/blank.txt"
grep_ok "^sa1b-slurm.sbatch: '$TMP/blank.txt': line 2 is empty \(every line names a tar\)$" "$TMP/.err" "names the line"
run_status 2 "sa1b-slurm.sbatch --check: CRLF line ends" "$C/sa1b-slurm.sbatch" --check "$TMP/crlf.txt"
grep_ok "^sa1b-slurm.sbatch: '$TMP/crlf.txt': line 1 ends in a carriage return" "$TMP/.err" "names the line"
if command -v parallel >/dev/null; then
    run_status 2 "sa1b-parallel.sh: an empty line" "$C/sa1b-parallel.sh" -o "$TMP/bl" "$TMP/blank.txt"
    test ! -e "$TMP/bl"
    ok $? "before anything runs"
else
    skip 2 "no GNU parallel"
fi
nothing_in "$TMP/slurm" "nothing is written"
run_status 2 "--check LIST says the same before submitting: exit 2" "$C/sa1b-slurm.sbatch" --check "$TMP/dup2.txt"
grep_ok "^sa1b-slurm.sbatch: '$TMP/dup2.txt': lines 1 and 2, '$TMP/d2/sa.tar' and '$TMP/d1/sa.tgz'" "$TMP/.err" "in one line"
printf '%s\n' "$TMP/d1/sa.tar" "$TMP/d2/sa.tgz" "$TMP/d2/other.tar" >"$TMP/dup3.txt"
run_status 2 "and catches a duplicate further down" "$C/sa1b-slurm.sbatch" --check "$TMP/dup3.txt"
printf '%s\n' "$TMP/d1/sa.tar" "$TMP/d2/other.tar" >"$TMP/good.txt"
run_ok "--check over a good list: exit 0" "$C/sa1b-slurm.sbatch" --check "$TMP/good.txt"
grep_ok "submit with sbatch --array=0-1$" "$TMP/.out" "and gives the --array range"

# streaming from a link file (file:// URLs)
if command -v curl >/dev/null && command -v jq >/dev/null; then
    cp "$TMP/d1/sa.tar" "$TMP/sa_000002.tar" || exit 99
    printf 'file_name\tcdn_link\r\n' >"$TMP/links.txt"
    printf 'sa_000002.tar\tfile://%s/sa_000002.tar\r\n' "$TMP" >>"$TMP/links.txt"
    cp "$TMP/links.txt" "$TMP/dup-links.txt"
    printf 'sa_000002.tar\tfile://%s/d2/sa.tar\r\n' "$TMP" >>"$TMP/dup-links.txt"
    run_status 2 "sa1b-stream.sh: a link file with sa_000002.tar twice: exit 2" \
        "$C/sa1b-stream.sh" -o "$TMP/sd" "$TMP/dup-links.txt" -- --image-size 32
    grep_ok "^sa1b-stream.sh: '$TMP/dup-links.txt': lines 2 and 3 \('sa_000002.tar', 'sa_000002.tar'\) would both write one shard$" \
        "$TMP/.err" "one line names both"
    nothing_in "$TMP/sd" "nothing is written"
    run_status 2 "a NAME given twice: exit 2" "$C/sa1b-stream.sh" -o "$TMP/sd" "$TMP/links.txt" sa_000002 sa_000002.tar
    grep_ok "^sa1b-stream.sh: 'sa_000002.tar' is given twice$" "$TMP/.err" "one line says so"
    nothing_in "$TMP/sd" "nothing is written"

    # a rerun with other options shards the tar again
    for s in 32 48; do
        sa1b-shard -q --image-size $s -o "$TMP/seq$s/" "$TMP/sa_000002.tar" || exit 99
    done
    run_ok "a stream with --image-size 48" "$C/sa1b-stream.sh" -o "$TMP/so" "$TMP/links.txt" sa_000002 -- --image-size 48
    run_ok "the same command with --image-size 32" "$C/sa1b-stream.sh" -o "$TMP/so" "$TMP/links.txt" sa_000002 -- --image-size 32
    grep_ok "^sa1b-stream.sh: 'sa_000002.tar': its shard was made with other options: streaming it again$" "$TMP/.err" \
        "streams it again, saying why"
    cmp -s "$TMP/seq32/sa_000002.shard" "$TMP/so/sa_000002.shard"
    ok $? "its shard is now the one of --image-size 32"
    run_ok "once more with --image-size 32" "$C/sa1b-stream.sh" -o "$TMP/so" "$TMP/links.txt" sa_000002 -- --image-size 32
    grep_ok "^sa1b-stream.sh: 'sa_000002.tar': complete shard exists, skipped$" "$TMP/.err" "is skipped"
    run_status 2 "options sa1b-shard refuses: exit 2 before anything is streamed" \
        "$C/sa1b-stream.sh" -o "$TMP/so" "$TMP/links.txt" sa_000002 -- --image-size 7
    cmp -s "$TMP/seq32/sa_000002.shard" "$TMP/so/sa_000002.shard"
    ok $? "and the shard is left as it was"

    # killed after sa1b-shard renamed its output, before the checksum mark
    SA1B_STREAM_TEST_KILL=shard "$C/sa1b-stream.sh" -o "$TMP/sk" "$TMP/links.txt" sa_000002 -- --image-size 48 \
        >/dev/null 2>&1
    is "$?" "143" "a run killed (SIGTERM) after its shard was put in place"
    test -e "$TMP/sk/sa_000002.shard" && test ! -e "$TMP/sk/sa_000002.tar.sha256"
    ok $? "leaves the shard without its checksum mark"
    run_ok "the same command again: exit 0" "$C/sa1b-stream.sh" -o "$TMP/sk" "$TMP/links.txt" sa_000002 -- --image-size 48
    grep_ok "^sa1b-stream.sh: 'sa_000002.tar': its shard has no '$TMP/sk/sa_000002.tar.sha256' \(the run that made it did not finish\): streaming it again$" \
        "$TMP/.err" "streams it again, saying why"
    (cd "$TMP" && sha256sum sa_000002.tar) >"$TMP/want.sha256"
    cmp -s "$TMP/want.sha256" "$TMP/sk/sa_000002.tar.sha256" && cmp -s "$TMP/seq48/sa_000002.shard" "$TMP/sk/sa_000002.shard"
    ok $? "now with its mark, and the shard of a clean run"

    # with --sums: the SHA-256 is checked before anything is put in place
    sed 's/^0/1/; t; s/^./0/' "$TMP/want.sha256" >"$TMP/bad.sums"   # one hex digit changed
    SA1B_STREAM_TEST_KILL=shard "$C/sa1b-stream.sh" --sums "$TMP/bad.sums" -o "$TMP/sb" "$TMP/links.txt" sa_000002 \
        -- --image-size 48 >/dev/null 2>&1
    is "$?" "3" "--sums, a wrong checksum: exit 3 before the point of the kill"
    test -z "$(find "$TMP/sb" -name 'sa_000002*')" && test -z "$(ls -A "$TMP/sb" | grep sa1b-stream)"
    ok $? "nothing of it is in place, nor its folder left"
    # a folder that a killed run left is removed by the next run of its tar
    mkdir "$TMP/sb/.sa1b-stream.sa_000002.Ab12Cd" && : >"$TMP/sb/.sa1b-stream.sa_000002.Ab12Cd/sa_000002.shard"
    run_status 3 "the same command again: exit 3" \
        "$C/sa1b-stream.sh" --sums "$TMP/bad.sums" -o "$TMP/sb" "$TMP/links.txt" sa_000002 -- --image-size 48
    grep_ok "^sa1b-stream.sh: 'sa_000002.tar': SHA-256 [0-9a-f]{64}, but '$TMP/bad.sums' says [0-9a-f]{64}: no shard kept$" \
        "$TMP/.err" "one line says why"
    is "$(ls -A "$TMP/sb")" "" "and a killed run's folder of that tar is gone"

    # a done tar whose mark disagrees with --sums is not done
    run_status 3 "--sums disagreeing with the mark of a done tar: exit 3" \
        "$C/sa1b-stream.sh" --sums "$TMP/bad.sums" -o "$TMP/sk" "$TMP/links.txt" sa_000002 -- --image-size 48
    grep_ok "^sa1b-stream.sh: 'sa_000002.tar': '$TMP/sk/sa_000002.tar.sha256' says SHA-256 [0-9a-f]{64}, but '$TMP/bad.sums' says [0-9a-f]{64}: streaming it again$" \
        "$TMP/.err" "it is streamed again, saying why"
    grep_ok "^sa1b-stream.sh: 'sa_000002.tar': SHA-256 [0-9a-f]{64}, but '$TMP/bad.sums' says [0-9a-f]{64}: the shard there before is kept, not marked done$" \
        "$TMP/.err" "the new download's checksum is wrong too: one line says so"
    cmp -s "$TMP/seq48/sa_000002.shard" "$TMP/sk/sa_000002.shard" && test ! -e "$TMP/sk/sa_000002.tar.sha256"
    ok $? "the shard there before is kept, unmarked"
    # what the shards of a tar replace in DIR: only that tar's shards
    cp "$TMP/d2/sa.tar" "$TMP/sa_000002-00001.tar" || exit 99
    { cat "$TMP/links.txt"; printf 'sa_000002-00001.tar\tfile://%s/sa_000002-00001.tar\r\n' "$TMP"; } >"$TMP/links2.txt"
    run_ok "the tar sa_000002-00001, then sa_000002, into one folder" sh -c \
        '"$1" -o "$2" "$3" sa_000002-00001 -- --image-size 32 && "$1" -o "$2" "$3" sa_000002 -- --image-size 32' \
        _ "$C/sa1b-stream.sh" "$TMP/sn" "$TMP/links2.txt"
    is "$(ls "$TMP/sn" | grep shard | tr '\n' ' ')" "sa_000002-00001.shard sa_000002.shard " \
        "the other tar's shard, of a name like a part's, stays (before: removed as an old part)"
    mkdir "$TMP/su" && echo "my notes" >"$TMP/su/sa_000002.shard"
    run_status 2 "a file that is no shard at the shard's name: exit 2" \
        "$C/sa1b-stream.sh" -o "$TMP/su" "$TMP/links.txt" sa_000002 -- --image-size 32
    grep_ok "^sa1b-stream.sh: 'sa_000002.tar': '$TMP/su/sa_000002.shard' exists and is not a shard of sa1b-shard: not replaced \(--force after -- replaces it\): not streamed$" \
        "$TMP/.err" "one line says why, before the download (before: after it)"
    is "$(cat "$TMP/su/sa_000002.shard"):$(ls -A "$TMP/su" | tr '\n' ' ')" "my notes:sa_000002.shard " \
        "the file is left as it was, nothing else is there (before: replaced)"
    run_ok "with --force after --" "$C/sa1b-stream.sh" -o "$TMP/su" "$TMP/links.txt" sa_000002 -- --image-size 32 --force
    cmp -s "$TMP/seq32/sa_000002.shard" "$TMP/su/sa_000002.shard"
    ok $? "it is replaced by the shard"
    # a run streaming the tar now (its folder's lock held): another stops
    if command -v flock >/dev/null; then
        mkdir -p "$TMP/sl/.sa1b-stream.sa_000002.Xy34Zw"
        flock "$TMP/sl/.sa1b-stream.sa_000002.Xy34Zw/.lock" sleep 30 & f=$!
        sleep 0.5
        run_status 3 "a second run of a tar that a live run streams: exit 3" \
            "$C/sa1b-stream.sh" -o "$TMP/sl" "$TMP/links.txt" sa_000002 -- --image-size 32
        grep_ok "^sa1b-stream.sh: 'sa_000002.tar': another run is streaming it into '$TMP/sl' \(its folder '$TMP/sl/.sa1b-stream.sa_000002.Xy34Zw' is in use\): skipped$" \
            "$TMP/.err" "one line says so"
        test -d "$TMP/sl/.sa1b-stream.sa_000002.Xy34Zw" && test ! -e "$TMP/sl/sa_000002.shard"
        ok $? "the live run's folder is left alone"
        kill $f 2>/dev/null
    else
        skip 3 "no flock(1)"
    fi
    run_ok "--sums with the right checksum: exit 0" \
        "$C/sa1b-stream.sh" --sums "$TMP/want.sha256" -o "$TMP/sk" "$TMP/links.txt" sa_000002 -- --image-size 48
    run_ok "and a rerun" \
        "$C/sa1b-stream.sh" --sums "$TMP/want.sha256" -o "$TMP/sk" "$TMP/links.txt" sa_000002 -- --image-size 48
    grep_ok "^sa1b-stream.sh: 'sa_000002.tar': complete shard exists, skipped$" "$TMP/.err" "skips it"
    # --sums naming DIR's own mark, which a tar streamed again loses first
    # (before: removed, then the download failed: the only checksum gone)
    printf 'file_name\tcdn_link\nsa_000002.tar\tfile://%s/nonexistent.tar\n' "$TMP" >"$TMP/gone-links.txt"
    cp "$TMP/sk/sa_000002.tar.sha256" "$TMP/sk.mark"
    run_status 2 "--sums naming the mark of a tar streamed again: exit 2" \
        "$C/sa1b-stream.sh" --sums "$TMP/sk/sa_000002.tar.sha256" -o "$TMP/sk" "$TMP/gone-links.txt" sa_000002 -- --image-size 32
    grep_ok "^sa1b-stream.sh: --sums '$TMP/sk/sa_000002.tar.sha256' is '$TMP/sk/sa_000002.tar.sha256', the mark of 'sa_000002.tar', which is removed when the tar is streamed again: give a copy" \
        "$TMP/.err" "one line says so"
    cmp -s "$TMP/sk.mark" "$TMP/sk/sa_000002.tar.sha256"
    ok $? "the mark is left as it was"
    # killed while it puts its shards in place (a mv that signals the script
    # on its 2nd call): SIGTERM waits until the whole set is in place (before:
    # the old set was removed, then its folder with the parts not yet in
    # place: nothing whole was left); after SIGKILL the folder holding the
    # rest stays, left alone by later runs until the shards in place are its
    mkdir "$TMP/mvbin" || exit 99
    printf '#!/bin/sh\nn=$(($(cat "$MVN" 2>/dev/null || echo 0) + 1)); echo $n >"$MVN"\n[ $n = 2 ] && kill -$MVSIG $PPID\nexec %s "$@"\n' \
        "$(command -v mv)" >"$TMP/mvbin/mv" && chmod +x "$TMP/mvbin/mv" || exit 99
    sa1b-shard -q --image-size 48 --max-images 1 --name sa_000002 -o "$TMP/ref48/" - <"$TMP/sa_000002.tar" || exit 99
    set_is_ref() { # DIR DESC: DIR holds the three parts of --image-size 48, each as sa1b-shard writes it
        r=0
        for k in 0 1 2; do cmp -s "$TMP/ref48/sa_000002-0000$k.shard" "$1/sa_000002-0000$k.shard" || r=1; done
        ok $r "$2"
    }
    for sig in TERM:143 KILL:137; do
        sig_rc=${sig#*:} sig=${sig%:*}
        run_ok "three parts" "$C/sa1b-stream.sh" -o "$TMP/mv$sig" "$TMP/links.txt" sa_000002 -- --image-size 32 --max-images 1
        cp "$TMP/mv$sig/sa_000002.tar.sha256" "$TMP/mark$sig"
        rm -f "$TMP/mvn"
        MVN="$TMP/mvn" MVSIG=$sig PATH="$TMP/mvbin:$PATH" \
            "$C/sa1b-stream.sh" -o "$TMP/mv$sig" "$TMP/links.txt" sa_000002 -- --image-size 48 --max-images 1 >/dev/null 2>&1
        is "$?" "$sig_rc" "other options, SIG$sig while the parts go in place: killed"
        sleep 0.2
    done
    set_is_ref "$TMP/mvTERM" "after SIGTERM the new set is whole in place"
    # (the mark there, the tar's SHA-256, is what the download matched
    # before its shards went in place: it stays, and marks the new set)
    cmp -s "$TMP/markTERM" "$TMP/mvTERM/sa_000002.tar.sha256" && test -z "$(find "$TMP/mvTERM" -name '.sa1b-stream*')"
    ok $? "the tar's mark as before, and no folder of the run is left"
    stage=$(find "$TMP/mvKILL" -name '.sa1b-stream.sa_000002.*')
    test -e "$stage/.in-place" && test -e "$stage/sa_000002-00000.shard" && test ! -e "$TMP/mvKILL/sa_000002-00000.shard"
    ok $? "after SIGKILL: part 0 still in its folder (parts go in last first), none in place"
    run_ok "a run with other options" "$C/sa1b-stream.sh" -o "$TMP/mvKILL" "$TMP/links.txt" sa_000002 -- --image-size 40 --max-images 1
    grep_ok "^sa1b-stream.sh: 'sa_000002.tar': '$stage' holds shards of a run that ended while it put them in place \(they may be the only copy of them\): left alone$" \
        "$TMP/.err" "leaves that folder alone, in one line"
    test -e "$stage/sa_000002-00000.shard"
    ok $? "and its shard"
    run_ok "a run with the killed run's options" "$C/sa1b-stream.sh" -o "$TMP/mvKILL" "$TMP/links.txt" sa_000002 -- --image-size 48 --max-images 1
    grep_ok "^sa1b-stream.sh: 'sa_000002.tar': removed '$stage', the folder of a run that ended while it put its shards in place \(they are those now in '$TMP/mvKILL'\)$" \
        "$TMP/.err" "removes it once the shards in place are its own"
    set_is_ref "$TMP/mvKILL" "the set in place is whole"
    # a link file naming a tar by a path: its mark would be outside DIR
    mkdir "$TMP/pl" && echo "my sums" >"$TMP/pl/x.tar.sha256" || exit 99
    printf 'file_name\tcdn_link\n../x.tar\tfile://%s/nonexistent.tar\n' "$TMP" >"$TMP/path-links.txt"
    run_status 3 "a link file naming '../x.tar': exit 3" "$C/sa1b-stream.sh" -o "$TMP/pl/d" "$TMP/path-links.txt"
    grep_ok "^sa1b-stream.sh: '$TMP/path-links.txt': '../x.tar' is not a tar's file name$" "$TMP/.err" "in one line"
    is "$(cat "$TMP/pl/x.tar.sha256")" "my sums" "the file outside DIR is left as it was (before: removed)"
else
    skip 62 "curl or jq missing"
fi
done_testing
