#!/bin/sh
# t1550: SIGTERM or SIGINT at any point of sa1b-shard leaves no temporary
# file and never an output that looks complete but is not (part 0 present
# means every part is there).  SA1B_TEST_KILL=WHAT:N raises SIGTERM at a
# fixed point (after the N-th sample written, part finished or output
# renamed), so no timing is involved.  Temporaries left by a run that could
# not clean up (SIGKILL) are removed by the next run writing the same
# output, unless another process still holds them.  (A real SIGINT from
# outside: t1520.)
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
sa1b-synth --quiet -n 6 -W 160 -H 120 -m 4 -s 1 -o "$TMP/a.tar" || exit 99
sa1b-synth --quiet -n 6 -W 160 -H 120 -m 4 -s 2 --first-id 100 -o "$TMP/b.tar" || exit 99

# no temporaries; for each input either no part 0, or all 3 parts holding 6 images
check_out() { # DIR DESC
    left=$(ls "$1" 2>/dev/null | grep -E '\.partial|\.tmp-' | tr '\n' ' ')
    is "$left" "" "$2: no temporary left"
    bad=""
    for n in a b; do
        [ -e "$1/$n-00000.shard" ] || continue
        imgs=0
        for p in 0 1 2; do
            f="$1/$n-0000$p.shard"
            sa1b-verify -q "$f" 2>/dev/null || { bad="$bad $f"; continue; }
            imgs=$((imgs + $(sa1b-inspect "$f" | grep -c '"type": *"image"')))
        done
        [ "$imgs" = 6 ] || bad="$bad $n:$imgs-images"
    done
    is "$bad" "" "$2: an output with part 0 is complete"
}
for pt in sample:1 sample:3 sample:6 sample:7 sample:12 part:1 part:2 part:4 commit:1 commit:2 commit:4; do
    rm -rf "$TMP/out"
    SA1B_TEST_KILL=$pt sa1b-shard -q -j 2 --image-size 32 --max-images 2 -o "$TMP/out" "$TMP/a.tar" "$TMP/b.tar" \
        >/dev/null 2>"$TMP/err"
    is "$?" "143" "SIGTERM at $pt: killed by the signal"
    check_out "$TMP/out" "SIGTERM at $pt"
done
for pt in sample:2 commit:1; do
    rm -rf "$TMP/one.shard"*
    SA1B_TEST_KILL=$pt sa1b-shard -q -j 2 --image-size 32 -o "$TMP/one.shard" "$TMP/a.tar" 2>/dev/null
    rc=$?
    left=$(ls "$TMP" | grep -E '^one\.shard\.' | tr '\n' ' ')
    is "$rc:$left" "143:" "one output, SIGTERM at $pt: no temporary left"
done
test -e "$TMP/one.shard" && sa1b-verify -q "$TMP/one.shard"
ok $? "SIGTERM after the rename keeps the complete shard"

# stale temporaries (a run killed with SIGKILL) are removed by the next run
mkdir "$TMP/st"
# (what temporaries hold: the writer's zeroed header first, or nothing; a
# file of other content is a user's and stays, see t1555)
head -c 300 /dev/zero >"$TMP/st/a.shard.partial.tmp-AbC123"
: >"$TMP/st/a.shard.partial"
echo keep >"$TMP/st/ab.shard.partial.tmp-XyZ789"   # another output's
run_ok "a run over stale temporaries" sa1b-shard -j 2 --image-size 32 -o "$TMP/st" "$TMP/a.tar"
grep_ok "removed '$TMP/st/a.shard.partial.tmp-AbC123', a temporary of an earlier run that ended before finishing it" \
    "$TMP/.err" "says it removed the stale temporary"
is "$(ls "$TMP/st" | tr '\n' ' ')" "a.shard ab.shard.partial.tmp-XyZ789 " "both of its own are gone, another output's stays"
if python3 -c 'import fcntl' 2>/dev/null; then
    echo busy >"$TMP/st/a.shard.partial.tmp-Held42"
    python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "r+"); fcntl.lockf(f, fcntl.LOCK_EX); open(sys.argv[2], "w").close(); time.sleep(60)' \
        "$TMP/st/a.shard.partial.tmp-Held42" "$TMP/locked" &
    holder=$!
    i=0
    while [ $i -lt 300 ] && ! [ -e "$TMP/locked" ]; do sleep 0.1; i=$((i + 1)); done
    run_ok "a run beside a temporary another process holds" sa1b-shard -q -j 2 --image-size 32 -o "$TMP/st" "$TMP/a.tar"
    test -e "$TMP/st/a.shard.partial.tmp-Held42"
    ok $? "leaves it alone"
    kill $holder 2>/dev/null
    wait $holder 2>/dev/null
else
    skip 2 "python3 fcntl not available"
fi

# the other tools that write through a temporary remove it too
run_ok "a shard for sa1b-export" sa1b-shard -q -j 2 --image-size 32 -o "$TMP/e.shard" "$TMP/a.tar"
mkdir "$TMP/ex"
SA1B_TEST_KILL=temp:1 sa1b-export "$TMP/e.shard" --grid 2 -o "$TMP/ex/sheet.png" 2>/dev/null
is "$?:$(ls "$TMP/ex" | tr '\n' ' ')" "143:" "sa1b-export: SIGTERM while writing leaves nothing"
SA1B_TEST_KILL=temp:1 sa1b-rle decode --size 2x2 --counts 04 --png -o "$TMP/ex/m.png" 2>/dev/null
is "$?:$(ls "$TMP/ex" | tr '\n' ' ')" "143:" "sa1b-rle: SIGTERM while writing leaves nothing"
run_ok "sa1b-rle writes its output otherwise" sa1b-rle decode --size 2x2 --counts 04 --png -o "$TMP/ex/m.png"
is "$(stat -c %a "$TMP/ex/m.png")" "$(printf '%o' $((0666 & ~$(umask))))" "with the usual permissions (not 0600)"

# started with SIGHUP ignored (nohup): it stays ignored, the run goes on to
# its end (before: its handler replaced the ignore, and a SIGHUP ended it,
# exit 129); SIGINT is taken even where a shell's background job has it
# ignored (t1520's kill -INT), as sa1b-train takes it
if command -v timeout >/dev/null && mkfifo "$TMP/hp" "$TMP/hp.go"; then
    (
        trap '' HUP
        export SA1B_TEST_PAUSE="commit:1:$TMP/hp"
        exec sa1b-shard -q -j 2 --image-size 32 -o "$TMP/hup.shard" "$TMP/a.tar"
    ) 2>"$TMP/hup.err" &
    r=$!
    pid=$(timeout 120 cat "$TMP/hp")
    kill -HUP "$pid"
    ok $? "a SIGHUP sent while it runs"
    timeout 120 sh -c ': >"$1"' _ "$TMP/hp.go"
    wait $r
    is "$?" "0" "ignored at the start: the run ends normally"
    run_ok "with its shard" sa1b-verify -q "$TMP/hup.shard"
else
    skip 3 "no timeout or mkfifo"
fi
done_testing
