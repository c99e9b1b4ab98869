# trainer/registry/local.mk - the backends by name: the one place that
# knows them all.
libsa1b_train_la_SOURCES += trainer/registry/registry.c
noinst_HEADERS += trainer/registry/registry.h
