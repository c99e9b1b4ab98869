# pipeline/loader.mk - the prefetching loader.
sa1binclude_HEADERS += pipeline/sa1b_loader.h
libsa1b_core_la_SOURCES += pipeline/loader.c
sa1binclude_HEADERS += pipeline/sa1b_manifest.h
libsa1b_core_la_SOURCES += pipeline/manifest.c
