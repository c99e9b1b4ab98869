# tests/sa1b-shard.mk - tests of sa1b-shard and subsampling.
check_PROGRAMS += tests/test-subsample
TESTS += tests/test-subsample
tests_test_subsample_SOURCES = tests/test-subsample.c
tests_test_subsample_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_subsample_LDADD = $(SA1B_LIBS)
TESTS += tests/t1500-shard-basic.sh tests/t1501-shard-strategies.sh tests/t1510-shard-bad-input.sh \
	tests/t1520-shard-killed.sh tests/t1530-shard-overwrite.sh tests/t1540-shard-rerun.sh tests/t1550-shard-signal.sh
EXTRA_DIST += tests/t1500-shard-basic.sh tests/t1501-shard-strategies.sh tests/t1510-shard-bad-input.sh \
	tests/t1520-shard-killed.sh tests/t1530-shard-overwrite.sh tests/t1540-shard-rerun.sh tests/t1550-shard-signal.sh tests/shard_check.py tests/sa1b_tamper.py \
	tests/shard_restamp.py
EXTRA_PROGRAMS += tests/bench/bench-jpeg-floor
tests_bench_bench_jpeg_floor_SOURCES = tests/bench/bench-jpeg-floor.c
tests_bench_bench_jpeg_floor_LDADD = $(SA1B_LIBS)
BENCH_SH += tests/bench/bench-shard.sh
BENCH_SH_DEPS += tests/bench/bench-jpeg-floor shard-tools/sa1b-shard shard-tools/sa1b-synth
EXTRA_DIST += tests/bench/bench-shard.sh tests/bench/bench-shard-ab.sh tests/bench/shard_baseline.py
TESTS += tests/t1560-contrib.sh
EXTRA_DIST += tests/t1560-contrib.sh contrib/sa1b-parallel.sh contrib/sa1b-slurm.sbatch contrib/sa1b-stream.sh
TESTS += tests/t1561-contrib-names.sh tests/t1562-shard-killed-copies.sh
EXTRA_DIST += tests/t1561-contrib-names.sh tests/t1562-shard-killed-copies.sh
TESTS += tests/t1570-stream-first-download.sh
EXTRA_DIST += tests/t1570-stream-first-download.sh
TESTS += tests/t1571-shard-killed-rerun-lines.sh tests/t1572-shard-skip-existing-stdin.sh tests/t1573-quickstart.sh
EXTRA_DIST += tests/t1571-shard-killed-rerun-lines.sh tests/t1572-shard-skip-existing-stdin.sh tests/t1573-quickstart.sh
TESTS += tests/t1544-shard-summary-stdout.sh
EXTRA_DIST += tests/t1544-shard-summary-stdout.sh
TESTS += tests/t1541-shard-stale-parts.sh tests/t1542-shard-commit-killed.sh \
	tests/t1543-shard-cut-keeps.sh tests/t1545-shard-concurrent.sh
EXTRA_DIST += tests/t1541-shard-stale-parts.sh tests/t1542-shard-commit-killed.sh \
	tests/t1543-shard-cut-keeps.sh tests/t1545-shard-concurrent.sh
TESTS += tests/t1546-shard-cut-compressed.sh tests/t1547-shard-no-member.sh tests/t1548-shard-stdin-names.sh
EXTRA_DIST += tests/t1546-shard-cut-compressed.sh tests/t1547-shard-no-member.sh tests/t1548-shard-stdin-names.sh
TESTS += tests/t1549-shard-other-input.sh tests/t1551-shard-temp-names.sh tests/t1552-shard-commit-fails.sh \
	tests/t1553-shard-sweep-race.sh
EXTRA_DIST += tests/t1549-shard-other-input.sh tests/t1551-shard-temp-names.sh tests/t1552-shard-commit-fails.sh \
	tests/t1553-shard-sweep-race.sh
TESTS += tests/t1554-shard-other-part.sh tests/t1555-shard-sweep-content.sh tests/t1556-shard-last-part.sh \
	tests/t1557-shard-many-parts.sh tests/t1558-shard-messages.sh tests/t1559-shard-lock-file.sh
EXTRA_DIST += tests/t1554-shard-other-part.sh tests/t1555-shard-sweep-content.sh tests/t1556-shard-last-part.sh \
	tests/t1557-shard-many-parts.sh tests/t1558-shard-messages.sh tests/t1559-shard-lock-file.sh
# masks that vanish at the mask resolution (issue 39): dropped, counted, kept on request
TESTS += tests/t1563-shard-empty-masks.sh tests/t1564-shard-empty-real.sh tests/t1566-shard-empty-rerun.sh
EXTRA_DIST += tests/t1563-shard-empty-masks.sh tests/t1564-shard-empty-real.sh tests/t1566-shard-empty-rerun.sh
