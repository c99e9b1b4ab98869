# tests/shard.mk - shard writer/reader tests, sa1b-inspect/verify/export tests, fuzz replay.
check_PROGRAMS += tests/test-shard
TESTS += tests/test-shard
tests_test_shard_SOURCES = tests/test-shard.c
tests_test_shard_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_shard_LDADD = $(SA1B_LIBS)
check_PROGRAMS += tests/test-shard-gen
tests_test_shard_gen_SOURCES = tests/test-shard-gen.c
tests_test_shard_gen_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests $(JANSSON_CFLAGS) $(TURBOJPEG_CFLAGS) $(PNG_CFLAGS)
tests_test_shard_gen_LDADD = $(SA1B_LIBS)
TESTS += tests/t1300-shard-inspect.sh tests/t1310-shard-verify.sh tests/t1320-shard-kill.sh \
	tests/t1330-shard-numpy.sh tests/t1340-shard-export.sh
EXTRA_DIST += tests/t1300-shard-inspect.sh tests/t1310-shard-verify.sh tests/t1320-shard-kill.sh \
	tests/t1330-shard-numpy.sh tests/t1340-shard-export.sh tests/shard-numpy-check.py
