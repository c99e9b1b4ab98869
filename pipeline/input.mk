# pipeline/input.mk - tar streaming, SA-1B annotation parsing, JPEG decode/resize.
# The one definition of the core library's extra CPPFLAGS (the data path uses
# libarchive, jansson, TurboJPEG and libpng headers).
libsa1b_core_la_CPPFLAGS = $(AM_CPPFLAGS) $(ARCHIVE_CFLAGS) $(JANSSON_CFLAGS) $(TURBOJPEG_CFLAGS) $(JPEG_CFLAGS) $(PNG_CFLAGS)
sa1binclude_HEADERS += pipeline/sa1b_tar.h pipeline/sa1b_anno.h pipeline/sa1b_image.h
libsa1b_core_la_SOURCES += pipeline/tar.c pipeline/anno.c pipeline/image.c pipeline/ycc.c
noinst_HEADERS += pipeline/anno_internal.h pipeline/ycc_internal.h
