# tests/rle.mk - tests, fuzz replay and bench of the RLE codec and sa1b-rle.
check_PROGRAMS += tests/test-rle
TESTS += tests/test-rle
tests_test_rle_SOURCES = tests/test-rle.c
tests_test_rle_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_rle_LDADD = $(SA1B_LIBS)
