# pipeline/subsample.mk - mask filters and subsampling strategies.
libsa1b_core_la_SOURCES += pipeline/subsample.c
sa1binclude_HEADERS += pipeline/sa1b_subsample.h
noinst_HEADERS += pipeline/rng.h
