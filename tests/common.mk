# tests/common.mk - project-wide tests: the CUDA build probe, man pages, --help.
check_PROGRAMS += tests/test-cuda-probe
TESTS += tests/test-cuda-probe
tests_test_cuda_probe_SOURCES = tests/test-cuda-probe.c $(CUDA_PROBE_SRC)
tests_test_cuda_probe_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_cuda_probe_LDADD = $(CUDA_LIBS)
TESTS += tests/t0001-man-lint.sh tests/t0002-help-matches-man.sh tests/t0003-messages.sh
EXTRA_DIST += tests/t0001-man-lint.sh tests/t0002-help-matches-man.sh tests/t0003-messages.sh
