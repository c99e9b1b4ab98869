# pipeline/prep.mk - per-sample preparation: filters, subsampling, masks and image to shard samples.
libsa1b_core_la_SOURCES += pipeline/subsample.c
sa1binclude_HEADERS += pipeline/sa1b_subsample.h
noinst_HEADERS += pipeline/rng.h
libsa1b_core_la_SOURCES += pipeline/prep.c
sa1binclude_HEADERS += pipeline/sa1b_prep.h
