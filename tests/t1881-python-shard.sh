#!/bin/sh
# t1881-python-shard.sh - sa1b.Shard and sa1b.verify against sa1b-inspect and
# sa1b-verify on the same shards (python/tests/test_shard.py): raw, JPEG and
# empty shards, and damaged copies (a payload byte flipped, the file cut
# short, the magic broken).
. "$top_srcdir/tests/test-lib.sh"
. "$SRC/python/tests/py-lib.sh"
GEN="$BUILD/tests/test-shard-gen"
cd "$TMP" || exit 99
"$GEN" gen raw.shard -n 6 -m 7 -f raw -s 32 -r 8 >/dev/null || exit 99
"$GEN" gen jpeg.shard -n 5 -m 9 -f jpeg -s 48 -r 13 >/dev/null || exit 99
"$GEN" gen empty.shard -n 0 -m 3 -f raw -s 16 -r 16 >/dev/null || exit 99
off=$(sa1b-inspect raw.shard | sed -n 's/.*"index": 0,.*"image_offset": \([0-9]*\).*/\1/p')
cp raw.shard flip.shard
printf '\377' | dd of=flip.shard bs=1 seek=$((off + 5)) conv=notrunc 2>/dev/null
head -c 3000 raw.shard >cut.shard
cp raw.shard magic.shard
printf 'X' | dd of=magic.shard bs=1 seek=0 conv=notrunc 2>/dev/null
"$PY" "$SRC/python/tests/test_shard.py" raw.shard jpeg.shard empty.shard -- flip.shard cut.shard magic.shard
