#!/bin/sh
# t1882-python-loader.sh - sa1b.Loader against sa1b-loadbench and
# sa1b.Shard on the same shards (python/tests/test_loader.py): order,
# content, zero-copy lifetime, errors, damaged samples, JPEG shards.
. "$top_srcdir/tests/test-lib.sh"
. "$SRC/python/tests/py-lib.sh"
cd "$TMP" || exit 99
sa1b-synth -n 9 -W 200 -H 150 -m 8 -s 5 -o a.tar --quiet &&
sa1b-synth -n 4 -W 150 -H 220 -m 5 -s 6 --first-id 100 -o b.tar --quiet &&
sa1b-synth -n 6 -W 180 -H 180 -m 5 -s 7 --first-id 200 -o c.tar --quiet &&
sa1b-shard -q --image-size 32 --mask-size 8 -o out a.tar b.tar c.tar || exit 99
sa1b-shard -q --image-size 40 --mask-size 10 --image-format jpeg -o jpeg a.tar b.tar c.tar || exit 99
off=$(sa1b-inspect out/b.shard | sed -n 's/.*"index": 2,.*"image_offset": \([0-9]*\).*/\1/p')
cp out/b.shard damaged.shard
printf '\377\377' | dd of=damaged.shard bs=1 seek=$((off + 3)) conv=notrunc 2>/dev/null
"$PY" "$SRC/python/tests/test_loader.py" out/a.shard out/b.shard out/c.shard -- damaged.shard \
    -- jpeg/a.shard jpeg/b.shard jpeg/c.shard
