# tests/common.mk - project-wide tests: the CUDA build probe, man pages, --help.
# the probe: a kernel through nvcc where CUDA is built, a stand-in otherwise
if HAVE_CUDA
CUDA_PROBE_SRC = tests/cuda_probe.cu
else
CUDA_PROBE_SRC = tests/cuda_probe_stub.c
endif
EXTRA_DIST += tests/cuda_probe.cu tests/cuda_probe_stub.c
noinst_HEADERS += tests/cuda_probe.h
check_PROGRAMS += tests/test-cuda-probe
TESTS += tests/test-cuda-probe
tests_test_cuda_probe_SOURCES = tests/test-cuda-probe.c $(CUDA_PROBE_SRC)
tests_test_cuda_probe_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_test_cuda_probe_LDADD = $(CUDA_LIBS)
TESTS += tests/t0001-man-lint.sh tests/t0002-help-matches-man.sh tests/t0003-messages.sh
EXTRA_DIST += tests/t0001-man-lint.sh tests/t0002-help-matches-man.sh tests/t0003-messages.sh
# scripts/gpu-check's parts that need no GPU (the rest runs on a GPU machine)
TESTS += tests/t0004-gpu-check-cli.sh
EXTRA_DIST += tests/t0004-gpu-check-cli.sh scripts/gpu-check scripts/gpu-debs tests/bench/gpu_dumpcmp.py tests/bench/gpu_torch.py
# trainer/ as rooms: its includes against trainer/layers
TESTS += tests/t0005-trainer-layout.sh
EXTRA_DIST += tests/t0005-trainer-layout.sh tests/trainer_layout.py
TESTS += tests/t0006-option-messages.sh
EXTRA_DIST += tests/t0006-option-messages.sh
