# tests/sa1b-shard.mk - tests of sa1b-shard and subsampling.
check_PROGRAMS += tests/test-subsample
TESTS += tests/test-subsample
tests_test_subsample_SOURCES = tests/test-subsample.c
tests_test_subsample_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_subsample_LDADD = $(SA1B_LIBS)
