# tests/rle.mk - tests, fuzz replay and bench of the RLE codec and sa1b-rle.
check_PROGRAMS += tests/test-rle
TESTS += tests/test-rle
tests_test_rle_SOURCES = tests/test-rle.c
tests_test_rle_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_rle_LDADD = $(SA1B_LIBS)

check_PROGRAMS += tests/test-rle-real
TESTS += tests/test-rle-real
tests_test_rle_real_SOURCES = tests/test-rle-real.c
tests_test_rle_real_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests $(JANSSON_CFLAGS) \
	-DSA1B_SHARED_DIR='"$(abs_top_srcdir)/../shared"'
tests_test_rle_real_LDADD = $(SA1B_LIBS)

check_PROGRAMS += tests/test-rle-prop
TESTS += tests/test-rle-prop
tests_test_rle_prop_SOURCES = tests/test-rle-prop.c
tests_test_rle_prop_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_rle_prop_LDADD = $(SA1B_LIBS)

RLE_TOOL_TESTS = tests/t1000-sa1b-rle-cli.sh tests/t1001-sa1b-rle-info.sh tests/t1002-sa1b-rle-codec.sh \
	tests/t1003-sa1b-rle-output.sh tests/t1004-sa1b-rle-hostile.sh
TESTS += $(RLE_TOOL_TESTS)
EXTRA_DIST += $(RLE_TOOL_TESTS)

check_PROGRAMS += tests/fuzz/replay-rle
TESTS += tests/fuzz/replay-rle
tests_fuzz_replay_rle_SOURCES = tests/fuzz/fuzz-rle.c tests/fuzz/replay.c
tests_fuzz_replay_rle_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_CORPUS='"$(abs_srcdir)/tests/fuzz/corpus/rle"'
tests_fuzz_replay_rle_LDADD = $(SA1B_LIBS)
EXTRA_DIST += tests/fuzz/corpus/rle
if ENABLE_FUZZING
EXTRA_PROGRAMS += tests/fuzz/fuzz-rle
FUZZ_TARGETS += tests/fuzz/fuzz-rle
tests_fuzz_fuzz_rle_SOURCES = tests/fuzz/fuzz-rle.c
tests_fuzz_fuzz_rle_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_rle_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_rle_LDADD = $(SA1B_LIBS)
endif

# fuzz target on sa1b-rle's input parsers (shard-tools/rle_input.c: info's
# JSON stream, mask arguments, PGM, PNG); its corpus is replayed by make check
RLE_INPUT_SOURCES = shard-tools/rle_input.c shard-tools/rle_input.h
RLE_INPUT_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/shard-tools -I$(srcdir)/cli $(JANSSON_CFLAGS) $(PNG_CFLAGS)
check_PROGRAMS += tests/fuzz/replay-rle-input
TESTS += tests/fuzz/replay-rle-input
tests_fuzz_replay_rle_input_SOURCES = tests/fuzz/fuzz-rle-input.c tests/fuzz/replay.c $(RLE_INPUT_SOURCES)
tests_fuzz_replay_rle_input_CPPFLAGS = $(RLE_INPUT_CPPFLAGS) -DFUZZ_CORPUS='"$(abs_srcdir)/tests/fuzz/corpus/rle-input"'
tests_fuzz_replay_rle_input_LDADD = $(CLI_LIBS)
EXTRA_DIST += tests/fuzz/corpus/rle-input
if ENABLE_FUZZING
EXTRA_PROGRAMS += tests/fuzz/fuzz-rle-input
FUZZ_TARGETS += tests/fuzz/fuzz-rle-input
tests_fuzz_fuzz_rle_input_SOURCES = tests/fuzz/fuzz-rle-input.c $(RLE_INPUT_SOURCES)
tests_fuzz_fuzz_rle_input_CPPFLAGS = $(RLE_INPUT_CPPFLAGS)
tests_fuzz_fuzz_rle_input_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_rle_input_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_rle_input_LDADD = $(CLI_LIBS)
endif

EXTRA_PROGRAMS += tests/bench/bench-rle
BENCHES += tests/bench/bench-rle
tests_bench_bench_rle_SOURCES = tests/bench/bench-rle.c
tests_bench_bench_rle_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS) \
	-DSA1B_SHARED_DIR='"$(abs_top_srcdir)/../shared"'
tests_bench_bench_rle_LDADD = $(SA1B_LIBS)

# the fast paths of rle.c against golden vectors (written by
# tests/rle_golden.py) and definitions; it compiles rle.c into itself to
# reach the careful string decoder, so it links error.c, not the library
check_PROGRAMS += tests/test-rle-fast
TESTS += tests/test-rle-fast
tests_test_rle_fast_SOURCES = tests/test-rle-fast.c rle/error.c
tests_test_rle_fast_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests \
	-DRLE_GOLDEN='"$(abs_srcdir)/tests/data/rle-golden.txt"'
EXTRA_DIST += tests/data/rle-golden.txt tests/rle_golden.py
noinst_HEADERS += rle/rle_internal.h
