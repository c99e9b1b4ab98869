# tests/sa1b-shard.mk - tests of sa1b-shard and subsampling.
check_PROGRAMS += tests/test-subsample
TESTS += tests/test-subsample
tests_test_subsample_SOURCES = tests/test-subsample.c
tests_test_subsample_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_subsample_LDADD = $(SA1B_LIBS)
TESTS += tests/t1500-shard-basic.sh tests/t1501-shard-strategies.sh tests/t1510-shard-bad-input.sh \
	tests/t1520-shard-killed.sh
EXTRA_DIST += tests/t1500-shard-basic.sh tests/t1501-shard-strategies.sh tests/t1510-shard-bad-input.sh \
	tests/t1520-shard-killed.sh tests/shard_check.py tests/sa1b_tamper.py
