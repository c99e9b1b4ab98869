#!/bin/sh
# t1003-sa1b-rle-output.sh - sa1b-rle's outputs: -o naming a device or a
# FIFO writes into it in place (the node stays; a rename over it would
# replace it with a regular file, as root even /dev/null), a regular file is
# replaced whole with no temporary left, and a write error (a full device,
# a full standard output) is one line with exit 3.
. "$top_srcdir/tests/test-lib.sh"
cd "$TMP" || exit 99

# a mask of 3x4 and its raw bytes
printf '\000\001\000\000\000\001\001\000\000\000\001\000' > want.raw

# a FIFO: written through, still a FIFO afterwards
mkfifo fifo || exit 99
cat fifo > got.raw &
reader=$!
run_ok "-o FIFO exits 0" sa1b-rle decode -s 3x4 -c 32201 -o fifo
[ -p fifo ]
st=$?
ok $st "the FIFO is still a FIFO"
# (replaced by a file, the FIFO would never see a writer: stop its reader)
if [ $st -eq 0 ]; then wait $reader; else kill $reader 2>/dev/null; wait $reader; fi
cmp -s got.raw want.raw
ok $? "the FIFO's reader got the mask"

# device nodes made here (never the system's), where mknod is permitted
if mknod null c 1 3 2>/dev/null && mknod full c 1 7 2>/dev/null; then
    run_ok "-o a null device exits 0" sa1b-rle decode -s 3x4 -c 32201 --png -o null
    [ -c null ]
    ok $? "the null device is still a character device"
    run_status 3 "-o a full device: exit 3" sa1b-rle decode -s 3x4 -c 32201 -o full
    is "$(wc -l < .err | tr -d ' ')" 1 "... one line"
    grep_ok "^sa1b-rle: cannot write 'full': No space left on device$" .err "... naming it and why"
    [ -c full ]
    ok $? "the full device is still a character device"
    c=$(head -c 120000 /dev/zero | sa1b-rle encode -s 300x400)
    for f in raw pgm png; do
        run_status 3 "a large --$f on a full device: exit 3" \
            sa1b-rle decode -s 300x400 -c "$c" --$f -o full
        grep_ok "^sa1b-rle: cannot write 'full': No space left on device$" .err "... and why"
    done
    is "$(ls -A | grep -c tmp)" 0 "no temporary file next to the devices"
else
    skip 13 "mknod is not permitted"
fi

# a regular file: replaced whole, no temporary left
echo old > out.raw
run_ok "-o an existing file" sa1b-rle decode -s 3x4 -c 32201 -o out.raw
cmp -s out.raw want.raw
ok $? "the file holds the mask"
[ -f out.raw ] && [ ! -L out.raw ]
ok $? "and is a regular file"
is "$(ls -A | grep -c 'out\.raw\.tmp')" 0 "no temporary file left"
# its permissions kept: a private file stays private, a shared one shared
for m in 600 640 664; do
    chmod $m out.raw
    run_ok "-o an existing file of mode $m" sa1b-rle decode -s 3x4 -c 32201 -o out.raw
    is "$(stat -c %a out.raw)" $m "... keeps mode $m"
done
# -o never replaces a shard (before: the mask replaced it, exit 0)
"$BUILD/tests/test-shard-gen" gen keep.shard -n 2 -s 32 -r 8 -m 3 --seed 1 || exit 99
cp keep.shard want.shard
run_status 2 "-o naming a shard: refused" sa1b-rle decode -s 3x4 -c 32201 -o keep.shard
grep_ok "^sa1b-rle: -o 'keep.shard' is a shard: not replaced; give another file$" "$TMP/.err" "... in one line"
cmp -s keep.shard want.shard
ok $? "... the shard is left as it was"
# the temporaries of out.raw that killed runs left (no lock, unchanged for
# 10 s) go, one line each; a live writer's (its flock held), a fresh one, and
# files of other names stay (before: every killed run's temporary stayed)
mkdir sw && printf x > sw/out.raw.tmp-Ab12Cd && printf x > sw/out.raw.tmp-Held01 && printf x > sw/out.raw.tmp-Fresh1 &&
    printf x > sw/out.raw.tmp-abc && printf x > sw/other.raw.tmp-Ab12Cd && ln -s out.raw.tmp-Held01 sw/out.raw.tmp-Link01 &&
    touch -h -d '1 minute ago' sw/out.raw.tmp-Ab12Cd sw/out.raw.tmp-Held01 sw/out.raw.tmp-abc sw/other.raw.tmp-Ab12Cd \
        sw/out.raw.tmp-Link01 || exit 99
if command -v flock >/dev/null; then
    flock -x sw/out.raw.tmp-Held01 sleep 30 &
    holder=$!
    i=0; while [ $i -lt 50 ] && flock -n -x sw/out.raw.tmp-Held01 true; do sleep 0.1; i=$((i + 1)); done
    run_ok "-o with temporaries of killed and live runs beside it" sa1b-rle decode -s 3x4 -c 32201 -o sw/out.raw
    kill $holder 2>/dev/null; wait $holder 2>/dev/null
    is "$(ls sw | tr '\n' ' ')" "other.raw.tmp-Ab12Cd out.raw out.raw.tmp-Fresh1 out.raw.tmp-Held01 out.raw.tmp-Link01 out.raw.tmp-abc " \
        "... only the killed run's temporary is gone"
    is "$(cat .err)" "sa1b-rle: removed 'sw/out.raw.tmp-Ab12Cd', the temporary of an earlier run that was killed while it wrote 'sw/out.raw'" \
        "... in one line"
    cmp -s sw/out.raw want.raw
    ok $? "... and the output is written"
else
    skip 4 "no flock(1) (Debian: util-linux)"
fi
rm -f new.raw
run_ok "-o a new file" sa1b-rle decode -s 3x4 -c 32201 -o new.raw
is "$(stat -c %a new.raw)" "$(printf '%o' $((0666 & ~$(umask))))" "... made 0666 less the umask"

# standard output that cannot be written: every command says so, exit 3
# (only ever redirected by the shell: -o /dev/full through an old sa1b-rle
# would have replaced the system's device)
if [ -w /dev/full ]; then
    for args in "decode -s 3x4 -c 32201" "decode -s 3x4 -c 32201 -o -" "encode -s 3x4 want.raw" \
                "iou 3x4:32201 3x4:327" "merge --union 3x4:32201 3x4:327" "info want.json"; do
        echo '{"size":[3,4],"counts":"32201"}' > want.json
        # shellcheck disable=SC2086
        sa1b-rle $args > /dev/full 2> full.err
        is "$?" 3 "$args > /dev/full: exit 3"
        grep_ok "^sa1b-rle: standard output: No space left on device$" full.err "... and why"
    done
else
    skip 12 "/dev/full missing"
fi

done_testing
