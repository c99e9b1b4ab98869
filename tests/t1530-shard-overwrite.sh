#!/bin/sh
# t1530: sa1b-shard never writes over its input nor over a file it did not
# write: an output that is an input (the same file, a hard link, or stdin
# redirected from it) or two inputs with one output name are refused with
# exit 2 before anything is written; an existing output that is not a
# shard of sa1b-shard needs --force; an earlier shard is replaced as before;
# an output that is a symbolic link is refused at start-up.
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
run_ok "synthesise" sa1b-synth -n 3 -W 120 -H 80 -m 4 -s 1 -o "$TMP/a.tar" --quiet
opts="-q -j 2 --image-size 32"
cp "$TMP/a.tar" "$TMP/same.shard"
run_status 2 "output = input (a tar named .shard)" sa1b-shard $opts -o "$TMP/same.shard" "$TMP/same.shard"
grep_ok "output '$TMP/same.shard' is the input '$TMP/same.shard'" "$TMP/.err" "says the output is the input"
cmp -s "$TMP/a.tar" "$TMP/same.shard"
ok $? "the input is intact"
ln "$TMP/same.shard" "$TMP/link.tar"
run_status 2 "output = a hard link of the input" sa1b-shard $opts -o "$TMP/same.shard" "$TMP/link.tar"
cmp -s "$TMP/a.tar" "$TMP/same.shard"
ok $? "the input is intact"
sa1b-shard $opts -o "$TMP/same.shard" - <"$TMP/same.shard" >"$TMP/.out" 2>"$TMP/.err"
is "$?" "2" "output = stdin redirected from it"
grep_ok "is the input '-' \(standard input\)" "$TMP/.err" "says so"
cmp -s "$TMP/a.tar" "$TMP/same.shard"
ok $? "the input is intact"
run_status 2 "--force does not make an input an output" sa1b-shard $opts --force -o "$TMP/same.shard" "$TMP/same.shard"
cmp -s "$TMP/a.tar" "$TMP/same.shard"
ok $? "the input is intact"
is "$(ls "$TMP" | grep -c partial)" "0" "no temporary was created"
# an input named like a later part of the output (part 0 absent): still the input
mkdir "$TMP/p"
cp "$TMP/a.tar" "$TMP/p/x-00001.shard"
run_status 2 "--max-images: an input named like part 1 (no part 0) is refused, --force too" \
    sa1b-shard $opts --force --max-images 2 -o "$TMP/p/x.shard" "$TMP/p/x-00001.shard"
grep_ok "output '$TMP/p/x-00001.shard' is the input '$TMP/p/x-00001.shard'" "$TMP/.err" "... saying so"
sa1b-shard $opts --force --max-images 2 -o "$TMP/p/x.shard" - <"$TMP/p/x-00001.shard" >"$TMP/.out" 2>"$TMP/.err"
is "$?" "2" "... and as standard input redirected from it"
cmp -s "$TMP/a.tar" "$TMP/p/x-00001.shard"
ok $? "the input is intact"
is "$(ls "$TMP/p")" "x-00001.shard" "nothing written beside it"

# a file that is not a shard of this tool needs --force
echo "my notes" >"$TMP/notes.shard"
run_status 2 "an existing non-shard output is refused" sa1b-shard $opts -o "$TMP/notes.shard" "$TMP/a.tar"
grep_ok "output '$TMP/notes.shard' exists and is not a shard of sa1b-shard: give --force" "$TMP/.err" "says how to replace it"
is "$(cat "$TMP/notes.shard")" "my notes" "and leaves it"
run_ok "--force replaces it" sa1b-shard $opts --force -o "$TMP/notes.shard" "$TMP/a.tar"
run_ok "with a valid shard" sa1b-verify "$TMP/notes.shard"
run_ok "an earlier shard of this tool is replaced without --force" sa1b-shard $opts --image-size 48 -o "$TMP/notes.shard" "$TMP/a.tar"
mkdir "$TMP/out" && echo "x" >"$TMP/out/a.shard"
run_status 2 "the same in a directory output" sa1b-shard $opts -o "$TMP/out" "$TMP/a.tar"
is "$(cat "$TMP/out/a.shard")" "x" "which is left alone"

# an output that is a symbolic link (to a shard of this very input) is
# refused at start-up, as the commit would refuse it after all the work
mkdir "$TMP/store" "$TMP/lk"
run_ok "a shard elsewhere" sa1b-shard $opts -o "$TMP/store/a.shard" "$TMP/a.tar"
ln -s ../store/a.shard "$TMP/lk/a.shard"
run_status 2 "an output that is a symbolic link: refused at start-up" sa1b-shard $opts -o "$TMP/lk" "$TMP/a.tar"
grep_ok "^sa1b-shard: output '$TMP/lk/a.shard' is a symbolic link: only a regular file is replaced" "$TMP/.err" \
    "says so"
test -L "$TMP/lk/a.shard" && run_ok "the link and its shard are left as they were" sa1b-verify -q "$TMP/store/a.shard"

# two inputs, one output name
mkdir "$TMP/d1" "$TMP/d2" && cp "$TMP/a.tar" "$TMP/d1/" && cp "$TMP/a.tar" "$TMP/d2/"
run_status 2 "two inputs that would write one output" sa1b-shard $opts -o "$TMP/new" "$TMP/d1/a.tar" "$TMP/d2/a.tar"
grep_ok "would both write 'a.shard'" "$TMP/.err" "says which"
test ! -e "$TMP/new"
ok $? "nothing was created"
done_testing
