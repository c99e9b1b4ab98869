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

RLE_TOOL_TESTS = tests/t1000-sa1b-rle-cli.sh tests/t1001-sa1b-rle-info.sh tests/t1002-sa1b-rle-codec.sh
TESTS += $(RLE_TOOL_TESTS)
EXTRA_DIST += $(RLE_TOOL_TESTS)
