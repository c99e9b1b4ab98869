# trainer/local.mk - sa1b-train: one folder per job, each with its own
# fragment, included lowest layer first (trainer/layers: the order, which
# tests/t0005-trainer-layout.sh checks on every quoted include).
#
# The trainer's private library (every folder but main/): tests and
# sa1b-train link it; it is not part of libsa1b.
noinst_LTLIBRARIES += libsa1b-train.la
libsa1b_train_la_SOURCES =
libsa1b_train_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/trainer $(OPENBLAS_CFLAGS) $(JANSSON_CFLAGS)
# The element-wise loops vectorise (the same bits: no reassociation is
# allowed, so sums keep their order), sqrtf included (no errno to set).
libsa1b_train_la_CFLAGS = $(AM_CFLAGS) -ftree-vectorize -fno-math-errno
libsa1b_train_la_LIBADD = $(OPENBLAS_LIBS) $(JANSSON_LIBS) -lm
TRAIN_LIBS = libsa1b-train.la $(SA1B_LIBS) $(OPENBLAS_LIBS) -lm
EXTRA_DIST += trainer/layers

include trainer/common/local.mk
include trainer/backend/local.mk
include trainer/backend/cpu/local.mk
include trainer/backend/meta/local.mk
include trainer/backend/cuda/local.mk
include trainer/registry/local.mk
include trainer/data/local.mk
include trainer/model/local.mk
include trainer/train/local.mk
include trainer/main/local.mk
