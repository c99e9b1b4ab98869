# rle/local.mk - the COCO RLE codec (part of libsa1b).
libsa1b_core_la_SOURCES += rle/error.c
sa1binclude_HEADERS += rle/sa1b_error.h
libsa1b_core_la_SOURCES += rle/rle.c
sa1binclude_HEADERS += rle/sa1b_rle.h
# the library overview page (RLE part; shard/loader sections added by their owners)
dist_man_MANS += man/libsa1b.3
