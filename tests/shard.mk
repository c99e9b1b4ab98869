# tests/shard.mk - shard writer/reader tests, sa1b-inspect/verify/export tests, fuzz replay.
check_PROGRAMS += tests/test-shard
TESTS += tests/test-shard
tests_test_shard_SOURCES = tests/test-shard.c
tests_test_shard_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_shard_LDADD = $(SA1B_LIBS)
