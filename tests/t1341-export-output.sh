#!/bin/sh
# t1341-export-output.sh - sa1b-export's -o: a device or a FIFO is written
# in place (the node stays; a rename over it would replace it with a
# regular file), a regular file is replaced whole with no temporary left, a
# write error (a full device) is one line with exit 3.
. "$top_srcdir/tests/test-lib.sh"
GEN="$BUILD/tests/test-shard-gen"
cd "$TMP" || exit 99

"$GEN" gen raw.shard -n 6 -s 64 -r 16 -m 6 --seed 5 || exit 99
sa1b-export raw.shard -o want.png || exit 99

# a FIFO: written through, still a FIFO afterwards
mkfifo fifo.png || exit 99
cat fifo.png > got.png &
reader=$!
run_ok "-o FIFO exits 0" sa1b-export raw.shard -o fifo.png
[ -p fifo.png ]
st=$?
ok $st "the FIFO is still a FIFO"
# (replaced by a file, the FIFO would never see a writer: stop its reader)
if [ $st -eq 0 ]; then wait $reader; else kill $reader 2>/dev/null; wait $reader; fi
cmp -s got.png want.png
ok $? "the FIFO's reader got the PNG"

# device nodes made here (never the system's), where mknod is permitted
if mknod null.png c 1 3 2>/dev/null && mknod full.png c 1 7 2>/dev/null &&
   mknod full.jpg c 1 7 2>/dev/null; then
    run_ok "-o a null device exits 0" sa1b-export raw.shard -o null.png
    [ -c null.png ]
    ok $? "the null device is still a character device"
    for f in full.png full.jpg; do
        for g in "" "--grid 6"; do
            # shellcheck disable=SC2086
            run_status 3 "$g -o a full device ($f): exit 3" sa1b-export raw.shard $g -o $f
            is "$(wc -l < .err | tr -d ' ')" 1 "... one line"
            grep_ok "^sa1b-export: cannot write '$f': No space left on device$" .err "... naming it and why"
        done
        [ -c $f ]
        ok $? "$f is still a character device"
    done
    is "$(ls -A | grep -c tmp)" 0 "no temporary file next to the devices"
else
    skip 17 "mknod is not permitted"
fi

# a regular file: replaced whole, no temporary left
echo old > out.png
run_ok "-o an existing file" sa1b-export raw.shard -o out.png
cmp -s out.png want.png
ok $? "the file holds the PNG"
[ -f out.png ] && [ ! -L out.png ]
ok $? "and is a regular file"
# -o never replaces the input, nor any shard (before: the PNG replaced it)
cp raw.shard in.png && cp raw.shard keep.shard
run_status 2 "-o naming the input: refused" sa1b-export in.png -o in.png
grep_ok "^sa1b-export: -o 'in.png' is the input 'in.png': give another file$" "$TMP/.err" "one line says why"
run_status 2 "-o naming the file standard input is redirected from: refused" sa1b-export - -o in.png <in.png
grep_ok "^sa1b-export: -o 'in.png' is the input '-' \(standard input\): give another file$" "$TMP/.err" "one line says why"
ln raw.shard link.png
run_status 2 "-o naming another shard (a hard link of it): refused" sa1b-export keep.shard -o link.png
grep_ok "^sa1b-export: -o 'link.png' is a shard: not replaced; give another file$" "$TMP/.err" "one line says why"
cmp -s in.png keep.shard && cmp -s raw.shard keep.shard
ok $? "the shards are left as they were"

is "$(ls -A | grep -c tmp)" 0 "no temporary file left"

done_testing
