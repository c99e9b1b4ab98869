#!/bin/sh
# t1311: a manifest.  sa1b-inspect --manifest lists the shards (sizes,
# CRC32C, counts, provenance); sa1b-verify --manifest checks the files and a
# folder against it (missing, added, changed; a folder given that holds
# none of it: each row missing; two rows that are one file); the loader
# refuses one file under two names in a glob or a manifest (a list may
# repeat one); sa1b-loadbench and sa1b-train
# --data read it instead of a glob and see the same data; a hostile
# manifest is refused with one line; -o in another folder than the
# relative names writes them relative to that folder (they are read from
# there).
. "$top_srcdir/tests/test-lib.sh"
command -v sa1b-synth >/dev/null || skip_all "sa1b-synth not built"
cd "$TMP" || exit 99
for n in a b c; do
    sa1b-synth --quiet -n 6 -W 240 -H 160 -m 6 -s "$(printf %d "'$n")" \
        --first-id "$(( $(printf %d "'$n") * 10 ))" -o "$n.tar" || exit 99
done
sa1b-shard -q -j 2 --image-size 64 --mask-size 16 -o out/ a.tar b.tar c.tar || exit 99

run_ok "sa1b-inspect --manifest out/*.shard" sa1b-inspect --manifest out/a.shard out/b.shard out/c.shard
cp "$TMP/.out" manifest.json
PY=/usr/bin/python3
if [ -x $PY ]; then
    $PY - manifest.json >"$TMP/py.out" <<'PYEOF'
import json, os, subprocess, sys
m = json.load(open(sys.argv[1]))
assert m["sa1b_manifest"] == 1, m
rows = m["shards"]
assert [r["file"] for r in rows] == ["out/a.shard", "out/b.shard", "out/c.shard"], rows
for r in rows:
    assert r["bytes"] == os.path.getsize(r["file"]), r
    h = json.loads(subprocess.check_output(["sa1b-inspect", r["file"]]).splitlines()[0])
    assert (r["images"], r["masks"]) == (h["images"], h["masks"]), (r, h)
    assert r["provenance"] == h["provenance"] and r["provenance"]["input_clean_end"] is True, r
    assert len(r["crc32c"]) == 8 and (r["image_size"], r["mask_size"]) == (64, 16), r
assert m["images"] == sum(r["images"] for r in rows) == 18, m
assert m["bytes"] == sum(r["bytes"] for r in rows), m
print("fine")
PYEOF
    is "$(cat "$TMP/py.out")" "fine" "it lists each file, its size, counts, provenance and the totals"
else
    skip 1 "no /usr/bin/python3"
fi
run_ok "sa1b-verify --manifest" sa1b-verify --manifest manifest.json
is "$(grep -c ': ok (' "$TMP/.out")" "3" "every listed shard checked"
run_ok "sa1b-verify --manifest out/: the folder is the data set" sa1b-verify -q --manifest manifest.json out/

# the folder differs from the manifest
cp out/a.shard out/extra.shard
run_status 1 "a shard that is not listed: exit 1" sa1b-verify --manifest manifest.json out
grep_ok "^sa1b-verify: 'out/extra.shard': not in the manifest 'manifest.json'$" "$TMP/.err" "one line names it"
grep_ok "^out/extra.shard: not in the manifest$" "$TMP/.out" "and its result line says so"
rm out/extra.shard
ln -s a.shard out/link.shard
run_status 1 "a symbolic link to a listed shard is not that shard: exit 1" sa1b-verify -q --manifest manifest.json out
grep_ok "^sa1b-verify: 'out/link.shard': not in the manifest 'manifest.json'$" "$TMP/.err" "one line names the link"
is "$(wc -l <"$TMP/.err" | tr -d ' ')" "1" "and only it"
rm out/link.shard
run_ok "the folder named twice is one data set" sa1b-verify -q --manifest manifest.json out ./out/
mkdir copy
run_status 1 "a folder given that holds none of the set (an empty copy): exit 1" \
    sa1b-verify --manifest manifest.json copy/
grep_ok "^sa1b-verify: 'out/a.shard': listed in 'manifest.json' as 'out/a.shard', but not among the files given$" \
    "$TMP/.err" "a line names each listed shard"
is "$(grep -c ': missing (listed in the manifest)$' "$TMP/.out")" "3" "and each is missing"
rmdir copy
# a listed shard whose name does not end in .shard, in the folder given:
# given too (the folder's *.shard leaves it out)
cp out/c.shard out/x.sa1b
sa1b-inspect --manifest out/a.shard out/x.sa1b >mx.json || exit 99
mv out/b.shard b.away && mv out/c.shard c.away
run_ok "a listed file without .shard in the folder given is given" sa1b-verify -q --manifest mx.json out/
mv b.away out/b.shard && mv c.away out/c.shard && rm out/x.sa1b mx.json
# one file under two names: read twice an epoch, so refused
ln -s a.shard out/z-link.shard
run_status 3 "sa1b-train --data: a glob matching a link beside its shard" \
    sa1b-train --config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --batch 2 --masks 2 --steps 1 -q \
    --data 'out/*.shard' --out lk
grep_ok "^sa1b-train: --data: 'out/a.shard' and 'out/z-link.shard' are one file: a shard is read once an epoch" \
    "$TMP/.err" "one line names both"
test ! -e lk
ok $? "nothing written"
rm out/z-link.shard
run_ok "a list of files may name a shard twice (read twice: a weighting)" \
    sa1b-loadbench -q out/a.shard out/b.shard ./out/a.shard
if [ -x /usr/bin/python3 ]; then
    /usr/bin/python3 - <<'PYEOF'
import json, os
m = json.load(open("manifest.json"))
r = dict(m["shards"][0], file="../%s/out/a.shard" % os.path.basename(os.getcwd()))
m["shards"].append(r)
for k in ("images", "masks", "bytes"):
    m[k] += r[k]
json.dump(m, open("dup.json", "w"))
PYEOF
    run_status 1 "sa1b-verify: two rows that are one file" sa1b-verify -q --manifest dup.json
    grep_ok "^sa1b-verify: 'dup.json': its rows 'out/a.shard' and '\.\./.*/out/a.shard' are one file: a shard is listed once$" \
        "$TMP/.err" "one line names both rows"
    run_status 2 "the loader refuses that manifest" sa1b-loadbench -q dup.json
else
    skip 3 "no /usr/bin/python3"
fi
mv out/b.shard b.keep
run_status 1 "a listed shard missing: exit 1" sa1b-verify --manifest manifest.json
grep_ok "^sa1b-verify: 'out/b.shard': listed in 'manifest.json' as 'out/b.shard': cannot open: No such file or directory$" \
    "$TMP/.err" "one line names it"
mv b.keep out/b.shard
cp out/c.shard c.keep
sa1b-shard -q -j 2 --image-size 64 --mask-size 16 --max-masks 2 -o out/c.shard c.tar || exit 99
run_status 1 "a shard made again with other options: exit 1" sa1b-verify -q --manifest manifest.json
grep_ok "^sa1b-verify: 'out/c.shard': [0-9]+ bytes, crc32c [0-9a-f]{8}, but 'manifest.json' lists [0-9]+ bytes, crc32c [0-9a-f]{8}, 6 images, [0-9]+ masks$" \
    "$TMP/.err" "one line gives both sizes and checksums"
cp c.keep out/c.shard

# the loader: a manifest gives the batches of the glob
sa1b-loadbench -b 3 -e 2 -s 5 -t 2 --print-ids "out/a.shard" "out/b.shard" "out/c.shard" >ids-glob 2>/dev/null
ok $? "sa1b-loadbench over the three shards"
sa1b-loadbench -b 3 -e 2 -s 5 -t 2 --print-ids manifest.json >ids-man 2>/dev/null
ok $? "sa1b-loadbench over the manifest"
cmp -s ids-glob ids-man
ok $? "the same batches, id for id"
is "$(wc -l <ids-man | tr -d ' ')" "12" "two epochs of six batches"
mkdir elsewhere && cp manifest.json elsewhere/
run_status 3 "names are relative to the manifest's folder" sa1b-loadbench -q elsewhere/manifest.json
grep_ok "'elsewhere/out/a.shard'" "$TMP/.err" "the message names the file it looked for"
# -o in another folder: the names are written relative to it (before
# 85894bf: written as given, exit 0, naming other files; then refused)
run_ok "--manifest -o elsewhere/m.json out/*.shard" \
    sa1b-inspect --manifest -o elsewhere/m.json out/a.shard out/b.shard out/c.shard
is "$(grep '"file"' elsewhere/m.json | tr -d ' ' | tr '\n' ' ')" '"file":"../out/a.shard", "file":"../out/b.shard", "file":"../out/c.shard", ' \
    "names it relative to its own folder"
run_ok "which verify" sa1b-verify -q --manifest elsewhere/m.json
# the same through a redirection of standard output into another folder
if [ -e /proc/self/fd/1 ]; then
    sa1b-inspect --manifest out/a.shard out/b.shard out/c.shard >elsewhere/r.json 2>"$TMP/r.err"
    is "$?" "0" "--manifest out/*.shard > elsewhere/r.json"
    cmp -s elsewhere/m.json elsewhere/r.json
    ok $? "writes the same names"
    sa1b-inspect --manifest -o - out/a.shard out/b.shard out/c.shard >elsewhere/r2.json 2>/dev/null
    is "$?" "0" "the same with -o -"
    sa1b-inspect --manifest out/a.shard out/b.shard out/c.shard >here.json
    ok $? "into this folder it is written"
    run_ok "and reads back" sa1b-verify -q --manifest here.json
else
    skip 6 "no /proc/self/fd"
fi
run_ok "absolute names from there" sa1b-inspect --manifest -o elsewhere/m.json "$TMP/out/a.shard" "$TMP/out/b.shard" "$TMP/out/c.shard"
run_ok "which verify" sa1b-verify -q --manifest elsewhere/m.json

# sa1b-train --data: a manifest and the equivalent glob train the same
common="--config tiny --image-size 64 --enc-depth 1 --dec-depth 1 --batch 3 --masks 4 --points 2 --threads 2 --steps 3 --log-every 1 -q"
# shellcheck disable=SC2086
run_ok "sa1b-train --data 'out/*.shard'" sa1b-train $common --data "out/*.shard" --out tg
# shellcheck disable=SC2086
run_ok "sa1b-train --data manifest.json" sa1b-train $common --data manifest.json --out tm
sed 's/.*"loss": \([0-9.e+-]*\),.*/\1/' tg/log.jsonl >loss-glob
sed 's/.*"loss": \([0-9.e+-]*\),.*/\1/' tm/log.jsonl >loss-man
is "$(wc -l <loss-man | tr -d ' ')" "3" "three logged steps"
cmp -s loss-glob loss-man
ok $? "the same losses, bit for bit"

# hostile manifests: refused with one line, by each reader
printf '{"sa1b_manifest": 1, "shards": [{"file": "out/a.shard"}]}\n' >bad.json
run_status 1 "sa1b-verify: a row without its keys, exit 1" sa1b-verify --manifest bad.json
is "$(cat "$TMP/.err")" "sa1b-verify: 'bad.json': shards[0]: no \"bytes\"" "in one line"
run_status 3 "sa1b-loadbench refuses it" sa1b-loadbench -q bad.json
is "$(wc -l <"$TMP/.err" | tr -d ' ')" "1" "in one line"
sed 's/"crc32c": "\([0-9a-f]*\)"/"crc32c": "\1\1"/' manifest.json >bad2.json
run_status 1 "a checksum of 16 digits" sa1b-verify --manifest bad2.json
grep_ok "'bad2.json': shards\[0\]: \"crc32c\" is not 8 hex digits$" "$TMP/.err" "is refused"
head -c 100 manifest.json >cut.json
run_status 1 "a manifest cut short" sa1b-verify --manifest cut.json
grep_ok "^sa1b-verify: 'cut.json': not JSON: line [0-9]+, column [0-9]+: " "$TMP/.err" "is refused with where"
run_status 3 "a manifest that does not exist: exit 3" sa1b-verify --manifest nothere.json
run_status 2 "sa1b-inspect --manifest -: usage error" sa1b-inspect --manifest -
run_status 2 "--manifest with --summary: usage error" sa1b-inspect --manifest --summary out/a.shard
run_status 2 "the same shard under two names: refused" sa1b-inspect --manifest out/a.shard out/b.shard ./out/a.shard
test ! -s "$TMP/.out"
ok $? "and nothing printed"
grep_ok "^sa1b-inspect: '/.*/out/a.shard' is named twice$" "$TMP/.err" "one line names it"
printf 'not a shard' >out/bogus.shard
run_status 1 "a file that is not a shard: exit 1" sa1b-inspect --manifest out/a.shard out/bogus.shard
test ! -s "$TMP/.out"
ok $? "and nothing printed"
grep_ok "^sa1b-inspect: 'out/bogus.shard': " "$TMP/.err" "the file is named"
rm out/bogus.shard
bad=$(printf 'out/b\377.shard')
cp out/a.shard "$bad"
run_status 1 "a shard whose name is not UTF-8: exit 1" sa1b-inspect --manifest out/b.shard "$bad"
grep_ok "its name is not UTF-8, which a manifest \(JSON\) cannot hold: rename it$" "$TMP/.err" "one line says so"
test ! -s "$TMP/.out"
ok $? "and nothing printed"
run_ok "sa1b-inspect of it without --manifest" sa1b-inspect "$bad"
grep_ok '^\{"type": "shard", "file": "out/b\\\\xff\.shard",' "$TMP/.out" "names it, its byte escaped (JSON holds UTF-8 alone)"
rm "$bad"
sa1b-shard -q --image-size 32 --mask-size 8 -o small.shard a.tar || exit 99
run_status 1 "shards of another S: refused" sa1b-inspect --manifest out/a.shard small.shard
grep_ok "^sa1b-inspect: 'small.shard': S=32 R=8 raw, unlike the first shard \(S=64 R=16 raw\)$" "$TMP/.err" "says why"
done_testing
