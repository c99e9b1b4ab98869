# tests/loader.mk - tests of the loader and sa1b-loadbench.
noinst_HEADERS += tests/test-loader-util.h

check_PROGRAMS += tests/test-loader
TESTS += tests/test-loader
tests_test_loader_SOURCES = tests/test-loader.c
tests_test_loader_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_loader_LDADD = $(SA1B_LIBS)

check_PROGRAMS += tests/test-loader-content
TESTS += tests/test-loader-content
tests_test_loader_content_SOURCES = tests/test-loader-content.c
tests_test_loader_content_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_loader_content_LDADD = $(SA1B_LIBS)

LOADBENCH_TESTS = tests/t1600-loadbench-cli.sh tests/t1601-loadbench-order.sh \
	tests/t1602-loadbench-stdout.sh
TESTS += $(LOADBENCH_TESTS)
EXTRA_DIST += $(LOADBENCH_TESTS)

EXTRA_PROGRAMS += tests/bench/bench-loader
BENCHES += tests/bench/bench-loader
tests_bench_bench_loader_SOURCES = tests/bench/bench-loader.c
tests_bench_bench_loader_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_bench_bench_loader_LDADD = $(SA1B_LIBS)

# batches from packed (version 1) and run-length (version 2) shards of the
# same samples are byte-identical; t1610 does it on sa1b-shard's output
check_PROGRAMS += tests/test-loader-rle
TESTS += tests/test-loader-rle tests/t1610-loader-rle.sh
tests_test_loader_rle_SOURCES = tests/test-loader-rle.c
tests_test_loader_rle_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_loader_rle_LDADD = $(SA1B_LIBS)
EXTRA_DIST += tests/t1610-loader-rle.sh

check_PROGRAMS += tests/test-manifest
TESTS += tests/test-manifest
tests_test_manifest_SOURCES = tests/test-manifest.c
tests_test_manifest_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_manifest_LDADD = $(SA1B_LIBS)

# fuzz target on the manifest reader; its corpus is replayed by make check
check_PROGRAMS += tests/fuzz/replay-manifest
TESTS += tests/fuzz/replay-manifest
tests_fuzz_replay_manifest_SOURCES = tests/fuzz/fuzz-manifest.c tests/fuzz/replay.c
tests_fuzz_replay_manifest_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_CORPUS='"$(abs_srcdir)/tests/fuzz/corpus/manifest"'
tests_fuzz_replay_manifest_LDADD = $(SA1B_LIBS)
EXTRA_DIST += tests/fuzz/corpus/manifest
if ENABLE_FUZZING
EXTRA_PROGRAMS += tests/fuzz/fuzz-manifest
FUZZ_TARGETS += tests/fuzz/fuzz-manifest
tests_fuzz_fuzz_manifest_SOURCES = tests/fuzz/fuzz-manifest.c
tests_fuzz_fuzz_manifest_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_manifest_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_manifest_LDADD = $(SA1B_LIBS)
endif

# masks empty at R are no valid pair, a full mask's negatives padding (issue 39)
TESTS += tests/t1611-loader-empty-masks.sh
EXTRA_DIST += tests/t1611-loader-empty-masks.sh
