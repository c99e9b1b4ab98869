# trainer/local.mk - sa1b-train and its backends.
if HAVE_CUDA
CUDA_PROBE_SRC = trainer/cuda_probe.cu
else
CUDA_PROBE_SRC = trainer/cuda_probe_stub.c
endif
EXTRA_DIST += trainer/cuda_probe.cu trainer/cuda_probe_stub.c
noinst_HEADERS += trainer/cuda_probe.h

# The trainer's private library: model, ops, backends, checkpoints.  Tests
# and sa1b-train link it; it is not part of libsa1b.
noinst_LTLIBRARIES += libsa1b-train.la
libsa1b_train_la_SOURCES = trainer/alloc.c trainer/backend.c trainer/backend_cpu.c trainer/backend_widen.c trainer/backend_cuda_sizes.c trainer/pool.c trainer/batch.c trainer/model.c \
	trainer/model_params.c trainer/model_layout.c \
	trainer/safetensors.c trainer/optim.c trainer/checkpoint.c trainer/data_shards.c \
	trainer/backend_meta.c trainer/plan.c trainer/vmlimit.c trainer/run_dir.c
libsa1b_train_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/trainer $(OPENBLAS_CFLAGS) $(JANSSON_CFLAGS)
# The element-wise loops vectorise (the same bits: no reassociation is
# allowed, so sums keep their order), sqrtf included (no errno to set).
libsa1b_train_la_CFLAGS = $(AM_CFLAGS) -ftree-vectorize -fno-math-errno
libsa1b_train_la_LIBADD = $(OPENBLAS_LIBS) $(JANSSON_LIBS) -lm
noinst_HEADERS += trainer/alloc.h trainer/backend.h trainer/batch.h trainer/kernels.h trainer/model.h \
	trainer/tr_rng.h trainer/safetensors.h trainer/optim.h trainer/quant8.h trainer/plan.h trainer/checkpoint.h trainer/data_shards.h \
	trainer/vmlimit.h trainer/pool.h trainer/model_impl.h trainer/run_dir.h
TRAIN_LIBS = libsa1b-train.la $(SA1B_LIBS) $(OPENBLAS_LIBS) -lm

bin_PROGRAMS += trainer/sa1b-train
# dist.c: the ranks of a data-parallel job (MPI when configured with it);
# the program's, since its watchdog reports a hung collective itself
trainer_sa1b_train_SOURCES = trainer/sa1b-train.c trainer/train_options.c trainer/train_eval.c \
	trainer/train_memory.c trainer/dist.c
trainer_sa1b_train_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/trainer -I$(srcdir)/cli $(MPI_CFLAGS)
trainer_sa1b_train_LDADD = libsa1b-train.la libsa1b-cli.la $(SA1B_LIBS) $(OPENBLAS_LIBS) $(MPI_LIBS) -lm -lpthread
noinst_HEADERS += trainer/dist.h trainer/train.h
dist_man_MANS += man/sa1b-train.1
