# trainer/backend/meta/local.mk - the planner's counting backend.
libsa1b_train_la_SOURCES += trainer/backend/meta/backend_meta.c
noinst_HEADERS += trainer/backend/meta/backend_meta.h
