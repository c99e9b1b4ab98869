# trainer/data/local.mk - batches and their sources: shards through
# pipeline/'s loader, and the synthetic generator.
libsa1b_train_la_SOURCES += trainer/data/batch.c trainer/data/data_shards.c
noinst_HEADERS += trainer/data/batch.h trainer/data/data_shards.h
