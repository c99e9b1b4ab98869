# trainer/data/local.mk - batches and their sources: the data-source
# interface (an ops table per kind), shards through pipeline/'s loader, the
# synthetic generator, and the planner's buffers.
libsa1b_train_la_SOURCES += trainer/data/batch.c trainer/data/data_shards.c trainer/data/synthetic.c \
	trainer/data/plan_source.c
noinst_HEADERS += trainer/data/batch.h trainer/data/source.h trainer/data/data_shards.h \
	trainer/data/synthetic.h trainer/data/plan_source.h
