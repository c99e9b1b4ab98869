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
tests_test_image_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests $(TURBOJPEG_CFLAGS)
tests_test_image_LDADD = $(SA1B_LIBS)
