# tests/input.mk - tests of tar/annotation/image input.
check_PROGRAMS += tests/test-tar tests/test-anno tests/test-image
TESTS += tests/test-tar tests/test-anno tests/test-image
tests_test_tar_SOURCES = tests/test-tar.c
tests_test_tar_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests $(ARCHIVE_CFLAGS)
tests_test_tar_LDADD = $(SA1B_LIBS)
tests_test_anno_SOURCES = tests/test-anno.c
tests_test_anno_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests $(JANSSON_CFLAGS)
tests_test_anno_LDADD = $(SA1B_LIBS)
tests_test_image_SOURCES = tests/test-image.c
tests_test_image_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests $(TURBOJPEG_CFLAGS) $(JPEG_CFLAGS)
tests_test_image_LDADD = $(SA1B_LIBS)

# fuzz targets: corpora replayed by make check; libFuzzer builds with --enable-fuzzing
check_PROGRAMS += tests/fuzz/replay-anno tests/fuzz/replay-tar tests/fuzz/replay-jpeg
TESTS += tests/fuzz/replay-anno tests/fuzz/replay-tar tests/fuzz/replay-jpeg
tests_fuzz_replay_anno_SOURCES = tests/fuzz/fuzz-anno.c tests/fuzz/replay.c tests/anno_agree.h
tests_fuzz_replay_anno_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -DFUZZ_CORPUS='"$(abs_srcdir)/tests/fuzz/corpus/anno"'
tests_fuzz_replay_anno_LDADD = $(SA1B_LIBS)
tests_fuzz_replay_tar_SOURCES = tests/fuzz/fuzz-tar.c tests/fuzz/replay.c
tests_fuzz_replay_tar_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_CORPUS='"$(abs_srcdir)/tests/fuzz/corpus/tar"'
tests_fuzz_replay_tar_LDADD = $(SA1B_LIBS)
tests_fuzz_replay_jpeg_SOURCES = tests/fuzz/fuzz-jpeg.c tests/fuzz/replay.c
tests_fuzz_replay_jpeg_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_CORPUS='"$(abs_srcdir)/tests/fuzz/corpus/jpeg"'
tests_fuzz_replay_jpeg_LDADD = $(SA1B_LIBS)
EXTRA_DIST += tests/fuzz/corpus/anno tests/fuzz/corpus/tar tests/fuzz/corpus/jpeg
if ENABLE_FUZZING
EXTRA_PROGRAMS += tests/fuzz/fuzz-anno tests/fuzz/fuzz-tar tests/fuzz/fuzz-jpeg
FUZZ_TARGETS += tests/fuzz/fuzz-anno tests/fuzz/fuzz-tar tests/fuzz/fuzz-jpeg
tests_fuzz_fuzz_anno_SOURCES = tests/fuzz/fuzz-anno.c tests/anno_agree.h
tests_fuzz_fuzz_anno_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
tests_fuzz_fuzz_anno_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_anno_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_anno_LDADD = $(SA1B_LIBS)
tests_fuzz_fuzz_tar_SOURCES = tests/fuzz/fuzz-tar.c
tests_fuzz_fuzz_tar_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_tar_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_tar_LDADD = $(SA1B_LIBS)
tests_fuzz_fuzz_jpeg_SOURCES = tests/fuzz/fuzz-jpeg.c
tests_fuzz_fuzz_jpeg_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_jpeg_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_jpeg_LDADD = $(SA1B_LIBS)
endif

# the fast annotation scanner against jansson (anno_internal.h)
check_PROGRAMS += tests/test-anno-fast
TESTS += tests/test-anno-fast
tests_test_anno_fast_SOURCES = tests/test-anno-fast.c tests/anno_agree.h
tests_test_anno_fast_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -DFUZZ_CORPUS='"$(abs_srcdir)/tests/fuzz/corpus/anno"'
tests_test_anno_fast_LDADD = $(SA1B_LIBS)
