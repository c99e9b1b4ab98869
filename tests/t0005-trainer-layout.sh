#!/bin/sh
# trainer/ as rooms: every quoted #include of the trainer's sources keeps to
# trainer/layers (lower layers only, neighbours as listed, outside folders
# as listed), no circle among its files or folders, at most four source
# files at trainer/'s root; and the check itself fails on each kind of
# offence, in a copy of the tree with one planted.
. "$top_srcdir/tests/test-lib.sh"
command -v python3 >/dev/null 2>&1 || skip_all "python3 not installed"
check() { python3 "$SRC/tests/trainer_layout.py" "$1" "$SRC" > "$TMP/out" 2>&1; }

check "$SRC/trainer"
ok $? "trainer/'s includes keep to trainer/layers: $(tail -n 1 "$TMP/out")"
sed 's/^/# /' "$TMP/out"
n=$(find "$SRC/trainer" -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | wc -l)
[ "$n" -le 4 ]
ok $? "at most four source files at trainer/'s root ($n)"
n=$(find "$SRC/trainer" -mindepth 1 -type d | wc -l)
[ "$n" -ge 5 ]
ok $? "at least five folders under trainer/ ($n)"
for d in $(find "$SRC/trainer" -mindepth 1 -type d); do
    [ -f "$d/local.mk" ] || { echo "# ${d#$SRC/} has no local.mk"; false; } || break
done
ok $? "every folder has its own local.mk"

# each planted offence must be found
plant() { # DESC FILE LINE-TO-ADD EXPECTED-PATTERN
    rm -rf "$TMP/t"; cp -R "$SRC/trainer" "$TMP/t"
    printf '%s\n' "$3" >> "$TMP/t/$2"
    check "$TMP/t"
    rc=$?
    [ $rc -eq 1 ] && grep -q "$4" "$TMP/out"
    ok $? "planted: $1 is found"
}
plant "an include of a higher layer" common/alloc.c '#include "model/model.h"' 'higher layer'
plant "an include of a folder of the same layer, no neighbour" backend/cpu/pool.c \
    '#include "backend/cuda/backend_cuda.h"' 'own layer and no neighbour'
plant "an include outside trainer/ not listed" model/model_seq.c '#include "cli.h"' 'does not let model include'
plant "a stale include" train/optim.c '#include "no_such_header.h"' 'nowhere'
plant "a circle of files within a folder" model/model_params.h '#include "model_layout.h"' 'a circle of files'
rm -rf "$TMP/t"; cp -R "$SRC/trainer" "$TMP/t"
echo 'neighbour backend/cpu backend/meta' >> "$TMP/t/layers"
echo '#include "backend/meta/backend_meta.h"' >> "$TMP/t/backend/cpu/pool.c"
check "$TMP/t"
[ $? -eq 1 ] && grep -q 'a circle of folders' "$TMP/out"
ok $? "planted: a circle of two neighbour folders is found"
rm -rf "$TMP/t"; cp -R "$SRC/trainer" "$TMP/t"
echo 'layer nonsense here' | sed 's/^layer/lair/' >> "$TMP/t/layers"
check "$TMP/t"
[ $? -eq 2 ]
ok $? "a line the layers file cannot have: exit 2"
done_testing
