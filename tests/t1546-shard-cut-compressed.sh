#!/bin/sh
# t1546: a compressed tar cut short is never a silent success.  A tar whose
# content stops at a member boundary (no end-of-archive blocks) and is then
# compressed, a compressed stream cut anywhere (its trailer missing, or in
# the middle) and one cut within its first block of output: each ends with
# the "input ends early" line naming the last sample, is counted, exit 1
# (--strict: 3, nothing written), from a path and from a pipe alike; gzip
# and whichever of xz, zstd, bzip2 are installed.  A complete compressed
# tar, and one with a single end-of-archive block, stay clean (exit 0).
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
command -v tar >/dev/null || skip_all "tar missing"
command -v gzip >/dev/null || skip_all "gzip missing"
sa1b-synth --quiet -n 12 -W 320 -H 240 -m 3 -o "$TMP/full.tar" || exit 99
# the block of sa_8.jpg's header: a cut there keeps samples 1..7 whole
blk=$(tar -tR -f "$TMP/full.tar" | sed -n 's/^block \([0-9]*\): sa_8\.jpg$/\1/p')
[ -n "$blk" ] || exit 99
head -c $((blk * 512)) "$TMP/full.tar" >"$TMP/cut.tar"
# the last member's end: one end-of-archive block kept, the second dropped
last=$(tar -tR -f "$TMP/full.tar" 2>/dev/null | sed -n 's/^block \([0-9]*\): \*\* Block of NULs \*\*$/\1/p')
[ -n "$last" ] || exit 99
head -c $((last * 512 + 512)) "$TMP/full.tar" >"$TMP/lone.tar"
opts="-j 2 --image-size 32"
filters=gzip
for f in xz zstd bzip2; do command -v $f >/dev/null && filters="$filters $f"; done
echo "# filters: $filters"

# shard_pipe STATUS DESC FILE [OPTS...]: FILE on standard input
shard_pipe() {
    want=$1; desc=$2; f=$3; shift 3
    sa1b-shard $opts "$@" - <"$f" >"$TMP/.out" 2>"$TMP/.err"
    is "$?" "$want" "$desc"
}

for z in $filters; do
    $z -c "$TMP/cut.tar" >"$TMP/cut.$z" || exit 99
    # 1. the content cut at a member boundary, the compression intact
    rm -f "$TMP/$z.shard"
    run_status 1 "$z, content cut at a member boundary: exit 1" \
        sa1b-shard $opts --json-summary -o "$TMP/$z.shard" "$TMP/cut.$z"
    grep_ok "^sa1b-shard: '$TMP/cut.$z': input ends early, after sample sa_7: 7 images read, the rest lost$" \
        "$TMP/.err" "$z: one line names the input and the last sample"
    is "$(grep -c "'$TMP/cut.$z'" "$TMP/.err")" 1 "$z: and it is the only line about it"
    grep_ok '"images":7,.*"inputs_cut_short":1' "$TMP/.out" "$z: counted, the 7 samples before the cut land"
    run_status 4 "$z: sa1b-verify calls the shard incomplete" sa1b-verify -q "$TMP/$z.shard"
    shard_pipe 1 "$z, the same through a pipe: exit 1" "$TMP/cut.$z" -q -o "$TMP/p$z.shard"
    grep_ok "^sa1b-shard: standard input: input ends early, after sample sa_7" "$TMP/.err" "$z, pipe: says so"
    run_status 3 "$z, --strict: exit 3" sa1b-shard $opts -q --strict --json-summary -o "$TMP/s$z.shard" "$TMP/cut.$z"
    grep_ok "input ends early, after sample sa_7" "$TMP/.err" "$z, --strict: says why"
    grep_ok '^\{"images":0,"masks_kept":0,"masks_dropped":0,.*"shards":0,' "$TMP/.out" \
        "$z, --strict: no image counted as written"
    [ ! -e "$TMP/s$z.shard" ] && [ -z "$(ls "$TMP" | grep "^s$z.shard")" ]
    ok $? "$z, --strict: nothing written, no temporary left"
    shard_pipe 3 "$z, --strict through a pipe: exit 3" "$TMP/cut.$z" -q --strict -o "$TMP/sp$z.shard"

    # 2. a complete tar compressed, then cut: never exit 0, one line per problem
    $z -c "$TMP/full.tar" >"$TMP/full.$z" || exit 99
    run_ok "$z, complete: exit 0" sa1b-shard $opts -q -o "$TMP/f$z.shard" "$TMP/full.$z"
    size=$(stat -c %s "$TMP/full.$z")
    bad=""; noise=""
    for k in 1 4 8 9 20 52 300 $((size / 2)); do
        head -c $((size - k)) "$TMP/full.$z" >"$TMP/x.$z"
        sa1b-shard $opts -q -o "$TMP/x.shard" "$TMP/x.$z" 2>"$TMP/x.err"
        rc=$?
        [ $rc -eq 1 ] || bad="$bad $k:$rc"
        grep -q "input ends early" "$TMP/x.err" || bad="$bad $k:no-line"
        # problems: a truncated member, the cut; nothing vaguer, nothing twice
        if grep -v -E "input ends early|: sa_[0-9]+\.(jpg|json): (member truncated|no matching)|complete output kept" \
            "$TMP/x.err" | grep -q .; then noise="$noise $k"; fi
        [ "$(grep -c 'member truncated' "$TMP/x.err")" -le 1 ] || noise="$noise $k:twice"
    done
    is "$bad" "" "$z, cut by 1..$((size / 2)) bytes from the end: exit 1 and the line each time"
    is "$noise" "" "$z, cut: no other message (as 'cannot read member: unknown error')"
    head -c $((size - 4)) "$TMP/full.$z" >"$TMP/x.$z"
    shard_pipe 1 "$z, cut by 4 bytes, through a pipe: exit 1" "$TMP/x.$z" -q -o "$TMP/x.shard"
    shard_pipe 3 "$z, cut by 4 bytes, --strict through a pipe: exit 3" "$TMP/x.$z" -q --strict -o "$TMP/xs.shard"

    # 3. cut within its first block of output: nothing readable, still exit 1
    head -c 3000 "$TMP/full.$z" >"$TMP/early.$z"
    rm -f "$TMP/e.shard"
    shard_pipe 1 "$z, cut within the first 3000 bytes, through a pipe: exit 1 (not 'not a tar')" \
        "$TMP/early.$z" -o "$TMP/e.shard" --json-summary
    grep_ok "^sa1b-shard: standard input: input ends early, before its first sample: no image read$" \
        "$TMP/.err" "$z, cut early: says so"
    grep_ok '"inputs_cut_short":1' "$TMP/.out" "$z, cut early: counted"
    run_status 4 "$z, cut early: the empty shard is incomplete" sa1b-verify -q "$TMP/e.shard"
    run_status 3 "$z, cut early, --strict: exit 3" sa1b-shard $opts -q --strict -o "$TMP/es.shard" "$TMP/early.$z"

    # 4. a single end-of-archive block: nothing is missing, clean
    $z -c "$TMP/lone.tar" >"$TMP/lone.$z" || exit 99
    run_ok "$z, one end-of-archive block of two: exit 0" sa1b-shard $opts -q --strict -o "$TMP/l$z.shard" "$TMP/lone.$z"
done

# the plain tars alike
run_status 1 "plain, cut at a member boundary: exit 1" sa1b-shard $opts -q -o "$TMP/c.shard" "$TMP/cut.tar"
grep_ok "^sa1b-shard: '$TMP/cut.tar': input ends early, after sample sa_7: 7 images read" "$TMP/.err" "plain: says so"
shard_pipe 1 "plain, through a pipe: exit 1" "$TMP/cut.tar" -q -o "$TMP/cp.shard"
shard_pipe 3 "plain, --strict through a pipe: exit 3" "$TMP/cut.tar" -q --strict -o "$TMP/cps.shard"
run_ok "plain, one end-of-archive block of two: exit 0" sa1b-shard $opts -q --strict -o "$TMP/l.shard" "$TMP/lone.tar"
shard_pipe 0 "plain, one end-of-archive block, through a pipe: exit 0" "$TMP/lone.tar" -q --strict -o "$TMP/lp.shard"
done_testing
