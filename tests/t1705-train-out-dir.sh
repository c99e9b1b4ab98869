#!/bin/sh
# t1705: --out DIR never starts over a run that DIR holds: without --resume
# or --overwrite it is refused (exit 2) and nothing in DIR changes;
# --overwrite starts afresh (the earlier run's files go, other files stay);
# a new DIR/ with a trailing slash is DIR; a FIFO named as a run file or a
# checkpoint is refused, never waited on.
. "$top_srcdir/tests/test-lib.sh"
common="--config tiny --enc-depth 1 --dec-depth 1 --batch 2 --masks 4 --points 2 --synthetic-batch 11 --threads 2 -q"
run_ok "a run of 8 steps" sa1b-train $common --steps 8 --warmup 1 --log-every 1 --ckpt-every 4 --out "$TMP/a"
echo "notes" >"$TMP/a/notes.txt"
snap() { (cd "$TMP/a" && ls -l --time-style=+%s.%N && cksum ./*) }
snap >"$TMP/before"
run_status 2 "a new run in its folder is refused" sa1b-train $common --steps 2 --out "$TMP/a"
grep_ok "output folder '$TMP/a' holds a run with a checkpoint of step 8 .*--resume .*--overwrite" "$TMP/.err" \
    "the message names the folder, the run's step and the two ways on"
is "$(wc -l <"$TMP/.err" | tr -d ' ')" "1" "in one line"
snap >"$TMP/after"
cmp -s "$TMP/before" "$TMP/after"
ok $? "nothing in the folder changed"

# a folder with only a log (killed before its first checkpoint) holds a run too
mkdir "$TMP/l" && echo '{"step": 1}' >"$TMP/l/log.jsonl"
run_status 2 "a folder with a run's log is refused" sa1b-train $common --steps 2 --out "$TMP/l"
is "$(cat "$TMP/l/log.jsonl")" '{"step": 1}' "and its log is kept"
# with no checkpoint there, the line never sends the user to --resume it
# (which fails: no latest), and a resume into it never to --overwrite
# (refused with --resume)
is "$(cat "$TMP/.err")" "sa1b-train: output folder '$TMP/l' holds files of a run (1: log, checkpoints) but no checkpoint to continue: start afresh with --overwrite (removes them)" \
    "the line says that there is nothing to continue"
run_status 2 "a resume into it is refused" sa1b-train --resume "$TMP/a" -q --steps 10 --out "$TMP/l"
is "$(cat "$TMP/.err")" "sa1b-train: output folder '$TMP/l' holds files of a run (1: log, checkpoints) but no checkpoint to continue: remove them, or give another --out" \
    "the line gives the ways that work"

# --resume into another folder that holds a run: refused as well
run_status 2 "--resume with an --out that holds another run" sa1b-train $common --steps 2 --resume "$TMP/a" --out "$TMP/l"
run_status 2 "--overwrite with --resume" sa1b-train $common --steps 8 --resume "$TMP/a" --overwrite
run_status 2 "--overwrite with --eval-only" sa1b-train $common --eval-only "$TMP/a/model-8.safetensors" --overwrite

# folders without a run are fine: empty, or with other files
mkdir "$TMP/e" "$TMP/o" && echo x >"$TMP/o/readme"
run_ok "an empty existing folder" sa1b-train $common --steps 2 --out "$TMP/e"
run_ok "a folder with other files" sa1b-train $common --steps 2 --out "$TMP/o"
is "$(cat "$TMP/o/readme")" "x" "whose files stay"

# the clear removes latest first and the log last: a kill in the middle
# never leaves a latest naming a removed checkpoint (every resume of it
# failed), nor checkpoint files without their log
if command -v strace >/dev/null && strace -f -qq -o /dev/null -e trace=unlink true 2>/dev/null; then
    cp -a "$TMP/a" "$TMP/ao"
    # temporaries of the run until one comes before latest in the folder's
    # own order (readdir's, which the clear followed: on ext4 a hash)
    i=0
    while [ $i -lt 16 ] || { [ "$(ls -U "$TMP/ao" | grep -v notes.txt | head -1)" = latest ] && [ $i -lt 400 ]; }; do
        i=$((i + 1))
        : >"$TMP/ao/model-8.safetensors.tmp.$i.0"
    done
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -o "$TMP/ao.trace" \
        -e trace=unlink,unlinkat sa1b-train $common --steps 2 --out "$TMP/ao" --overwrite >/dev/null 2>&1
    st=$?
    sed -n 's/.*unlink[at]*(.*"[^"]*\/\([^"/]*\)".*= 0$/\1/p' "$TMP/ao.trace" | grep -v '^\.sa1b' >"$TMP/ao.order"
    is "$st:$(head -1 "$TMP/ao.order"):$(tail -1 "$TMP/ao.order")" "0:latest:log.jsonl" \
        "--overwrite removes latest first, the log last ($(wc -l <"$TMP/ao.order" | tr -d ' ') files)"
else
    skip 1 "no strace (Debian: strace)"
fi
run_ok "--overwrite starts afresh" sa1b-train $common --steps 2 --warmup 1 --log-every 1 --out "$TMP/a" --overwrite
is "$(cd "$TMP/a" && ls | tr '\n' ' ')" "latest log.jsonl model-2.safetensors notes.txt state-2.bin " \
    "only the new run's files and the folder's other files remain"
is "$(wc -l <"$TMP/a/log.jsonl" | tr -d ' ')" "2" "the log is the new run's"

# --overwrite where a name of the run is a folder (unlink refuses it): one
# line, nothing of the old run removed (before: latest and the last
# checkpoint went, the folder was left with an earlier one and no latest)
run_ok "a run of 4 steps" sa1b-train $common --steps 4 --warmup 1 --ckpt-every 2 --out "$TMP/d"
for name in model-10.safetensors latest.tmp state-10.r1.bin; do
    mkdir "$TMP/d/$name"
    dsnap() { (cd "$TMP/d" && ls -l --time-style=+%s.%N && cksum latest log.jsonl ./*.bin ./*.safetensors 2>/dev/null); }
    dsnap >"$TMP/before"
    run_status 3 "--overwrite with a folder named $name" sa1b-train $common --steps 2 --out "$TMP/d" --overwrite
    is "$(cat "$TMP/.err")" "sa1b-train: --overwrite: cannot remove '$TMP/d/$name': Is a directory (nothing was removed)" \
        "one line naming it"
    dsnap >"$TMP/after"
    cmp -s "$TMP/before" "$TMP/after"
    ok $? "nothing of the old run was removed ($name)"
    rmdir "$TMP/d/$name"
done
run_ok "--resume of the old run goes on" sa1b-train --resume "$TMP/d" -q --steps 6

# a new folder named with a trailing slash (shell completion's form) is the
# folder: created, not refused as the folder it would be created in
run_ok "--out NEW/ is created" sa1b-train $common --steps 2 --out "$TMP/s/"
test -s "$TMP/s/latest"
ok $? "and holds the run"
mkdir "$TMP/p"
run_ok "--out DIR/NEW/ (DIR exists) is created" sa1b-train $common --steps 2 --out "$TMP/p/n//"
test -s "$TMP/p/n/latest"
ok $? "and holds the run"
run_status 3 "--out NONE/NEW/ is refused" sa1b-train $common --steps 2 --out "$TMP/none/n/"
is "$(cat "$TMP/.err")" "sa1b-train: output folder '$TMP/none' does not exist (--out $TMP/none/n/ is created in it)" \
    "naming the folder that is missing"

# a FIFO where a run file or a checkpoint is read is refused in one line,
# never waited on (before: every one of these hung for good)
if command -v mkfifo >/dev/null && command -v timeout >/dev/null; then
    mkdir "$TMP/f"
    mkfifo "$TMP/f/latest"
    run_status 2 "a new run into a folder with a FIFO named latest is refused" \
        timeout 60 sa1b-train $common --steps 2 --out "$TMP/f"
    run_status 3 "--resume of it ends" timeout 60 sa1b-train --resume "$TMP/f" -q
    is "$(cat "$TMP/.err")" "sa1b-train: cannot resume from '$TMP/f/latest': not a regular file" "in one line"
    for name in log.jsonl state-2.bin model-2.safetensors; do
        rm -rf "$TMP/g" && cp -r "$TMP/s" "$TMP/g" && rm "$TMP/g/$name" && mkfifo "$TMP/g/$name"
        run_status 3 "--resume with a FIFO as $name ends" timeout 60 sa1b-train --resume "$TMP/g" -q
        grep_ok "'$TMP/g/$name'.* not a regular file" "$TMP/.err" "naming it"
    done
    mkfifo "$TMP/fifo"
    run_status 3 "--init of a FIFO ends" timeout 60 sa1b-train $common --steps 2 --init "$TMP/fifo" --out "$TMP/i"
    run_status 3 "--eval-only of a FIFO ends" timeout 60 sa1b-train $common --eval-only "$TMP/fifo"
else
    skip 11 "no mkfifo or timeout"
fi
done_testing
