# trainer/backend/local.mk - the backend contract, which knows no backend.
libsa1b_train_la_SOURCES += trainer/backend/backend.c
noinst_HEADERS += trainer/backend/backend.h
