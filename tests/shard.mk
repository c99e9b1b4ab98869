# tests/shard.mk - shard writer/reader tests, sa1b-inspect/verify/export tests, fuzz replay.
check_PROGRAMS += tests/test-shard
TESTS += tests/test-shard
tests_test_shard_SOURCES = tests/test-shard.c
tests_test_shard_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_shard_LDADD = $(SA1B_LIBS)
check_PROGRAMS += tests/test-shard-gen
tests_test_shard_gen_SOURCES = tests/test-shard-gen.c
tests_test_shard_gen_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/cli $(JANSSON_CFLAGS) $(TURBOJPEG_CFLAGS) $(PNG_CFLAGS)
tests_test_shard_gen_LDADD = $(CLI_LIBS)
TESTS += tests/t1300-shard-inspect.sh tests/t1310-shard-verify.sh tests/t1320-shard-kill.sh \
	tests/t1330-shard-numpy.sh tests/t1340-shard-export.sh \
	tests/t1312-shard-stdout.sh tests/t1313-inspect-output.sh tests/t1341-export-output.sh
EXTRA_DIST += tests/t1300-shard-inspect.sh tests/t1310-shard-verify.sh tests/t1320-shard-kill.sh \
	tests/t1330-shard-numpy.sh tests/t1340-shard-export.sh tests/shard-numpy-check.py \
	tests/t1312-shard-stdout.sh tests/t1313-inspect-output.sh tests/t1341-export-output.sh
TESTS += tests/t1314-manifest-names.sh
EXTRA_DIST += tests/t1314-manifest-names.sh
TESTS += tests/t1315-provenance-quoted.sh
EXTRA_DIST += tests/t1315-provenance-quoted.sh

# fuzz target on the shard reader; its corpus is replayed by make check
check_PROGRAMS += tests/fuzz/replay-shard
TESTS += tests/fuzz/replay-shard
tests_fuzz_replay_shard_SOURCES = tests/fuzz/fuzz-shard.c tests/fuzz/replay.c
tests_fuzz_replay_shard_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_CORPUS='"$(abs_srcdir)/tests/fuzz/corpus/shard"'
tests_fuzz_replay_shard_LDADD = $(SA1B_LIBS)
EXTRA_DIST += tests/fuzz/corpus/shard
if ENABLE_FUZZING
EXTRA_PROGRAMS += tests/fuzz/fuzz-shard
FUZZ_TARGETS += tests/fuzz/fuzz-shard
tests_fuzz_fuzz_shard_SOURCES = tests/fuzz/fuzz-shard.c
tests_fuzz_fuzz_shard_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_shard_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_shard_LDADD = $(SA1B_LIBS)
endif

# the writer on every length phase against its direct-write blocks
check_PROGRAMS += tests/test-shard-writer-tail
TESTS += tests/test-shard-writer-tail
tests_test_shard_writer_tail_SOURCES = tests/test-shard-writer-tail.c
tests_test_shard_writer_tail_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_shard_writer_tail_LDADD = $(SA1B_LIBS)

# the annotation fast path's block-wise string scanner against jansson
check_PROGRAMS += tests/test-anno-scan
TESTS += tests/test-anno-scan
tests_test_anno_scan_SOURCES = tests/test-anno-scan.c tests/anno_agree.h
tests_test_anno_scan_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests $(JANSSON_CFLAGS)
tests_test_anno_scan_LDADD = $(SA1B_LIBS)

# sa1b_prep_run with its buffers reused over changing geometry == fresh buffers
check_PROGRAMS += tests/test-prep-reuse
TESTS += tests/test-prep-reuse
tests_test_prep_reuse_SOURCES = tests/test-prep-reuse.c
tests_test_prep_reuse_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_prep_reuse_LDADD = $(SA1B_LIBS)

# the mask packer (its SIMD paths) against the documented bit order
check_PROGRAMS += tests/test-shard-pack
TESTS += tests/test-shard-pack
tests_test_shard_pack_SOURCES = tests/test-shard-pack.c
tests_test_shard_pack_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_shard_pack_LDADD = $(SA1B_LIBS)

# fuzz target on a shard's provenance as its readers take it (the text put
# in an intact shard); its corpus is replayed by make check
check_PROGRAMS += tests/fuzz/replay-provenance
TESTS += tests/fuzz/replay-provenance
tests_fuzz_replay_provenance_SOURCES = tests/fuzz/fuzz-provenance.c tests/fuzz/replay.c
tests_fuzz_replay_provenance_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/pipeline $(JANSSON_CFLAGS) \
	-DFUZZ_CORPUS='"$(abs_srcdir)/tests/fuzz/corpus/provenance"'
tests_fuzz_replay_provenance_LDADD = $(SA1B_LIBS)
EXTRA_DIST += tests/fuzz/corpus/provenance
if ENABLE_FUZZING
EXTRA_PROGRAMS += tests/fuzz/fuzz-provenance
FUZZ_TARGETS += tests/fuzz/fuzz-provenance
tests_fuzz_fuzz_provenance_SOURCES = tests/fuzz/fuzz-provenance.c
tests_fuzz_fuzz_provenance_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/pipeline $(JANSSON_CFLAGS)
tests_fuzz_fuzz_provenance_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_provenance_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_provenance_LDADD = $(SA1B_LIBS)
endif

# fuzz target on the run decoder of version-2 masks; its corpus is replayed by make check
check_PROGRAMS += tests/fuzz/replay-runs
TESTS += tests/fuzz/replay-runs
tests_fuzz_replay_runs_SOURCES = tests/fuzz/fuzz-runs.c tests/fuzz/replay.c
tests_fuzz_replay_runs_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/pipeline -DFUZZ_CORPUS='"$(abs_srcdir)/tests/fuzz/corpus/runs"'
tests_fuzz_replay_runs_LDADD = $(SA1B_LIBS)
EXTRA_DIST += tests/fuzz/corpus/runs
if ENABLE_FUZZING
EXTRA_PROGRAMS += tests/fuzz/fuzz-runs
FUZZ_TARGETS += tests/fuzz/fuzz-runs
tests_fuzz_fuzz_runs_SOURCES = tests/fuzz/fuzz-runs.c
tests_fuzz_fuzz_runs_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/pipeline
tests_fuzz_fuzz_runs_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_runs_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_runs_LDADD = $(SA1B_LIBS)
endif

# run-length masks (format version 2): the coder, the reader, the tools, and
# the version-1 fixtures written before version 2 existed
check_PROGRAMS += tests/test-shard-runs
TESTS += tests/test-shard-runs tests/t1350-shard-rle.sh
tests_test_shard_runs_SOURCES = tests/test-shard-runs.c
tests_test_shard_runs_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/pipeline
tests_test_shard_runs_LDADD = $(SA1B_LIBS)
EXTRA_DIST += tests/t1350-shard-rle.sh tests/data/v1-input.tar tests/data/v1-jpeg.shard \
	tests/data/v1-raw.shard

# make bench: bytes per image by part, loader and sa1b-shard speed, rle vs packed
BENCH_SH += tests/bench/bench-rle-shards.sh
BENCH_SH_DEPS += shard-tools/sa1b-shard shard-tools/sa1b-synth shard-tools/sa1b-inspect \
	shard-tools/sa1b-loadbench
EXTRA_DIST += tests/bench/bench-rle-shards.sh tests/bench/photo_tar.py

TESTS += tests/t1311-manifest.sh
EXTRA_DIST += tests/t1311-manifest.sh
TESTS += tests/t1331-shard-numpy-masks.sh
EXTRA_DIST += tests/t1331-shard-numpy-masks.sh tests/shard-numpy-masks.py
