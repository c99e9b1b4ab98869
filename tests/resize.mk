# tests/resize.mk - the area resize's SIMD kernels: the private test hooks and the benchmark
# (their equality with the portable reference is tested by tests/test-image).
noinst_HEADERS += pipeline/image_internal.h
EXTRA_PROGRAMS += tests/bench/bench-resize
BENCHES += tests/bench/bench-resize
tests_bench_bench_resize_SOURCES = tests/bench/bench-resize.c
tests_bench_bench_resize_LDADD = $(SA1B_LIBS)
