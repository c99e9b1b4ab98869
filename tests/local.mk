# tests/local.mk - make check: every test speaks TAP; one fragment per component.
EXTRA_DIST += tests/tap-wrap.sh tests/test-lib.sh tests/coco_rle.py
noinst_HEADERS += tests/tap.h tests/test-rng.h
include tests/common.mk
include tests/rle.mk
include tests/input.mk
include tests/shard.mk
include tests/synth.mk
include tests/sa1b-shard.mk
include tests/loader.mk
include tests/trainer.mk
include tests/resize.mk
