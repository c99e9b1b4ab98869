# trainer/main/local.mk - the program sa1b-train: options, the job, the
# loop, evaluation, memory messages, faults and signals, distribution; the
# only code of the trainer that prints or exits.
bin_PROGRAMS += trainer/sa1b-train
# dist.c: the ranks of a data-parallel job (MPI when configured with it);
# the program's, since its watchdog reports a hung collective itself
trainer_sa1b_train_SOURCES = trainer/main/sa1b-train.c trainer/main/train_options.c trainer/main/run_record.c trainer/main/out_dir.c \
	trainer/main/train_loop.c trainer/main/train_save.c trainer/main/train_eval.c trainer/main/dump.c \
	trainer/main/data_open.c trainer/main/run_log.c trainer/main/ranks.c trainer/main/signals.c trainer/main/faults.c \
	trainer/main/train_memory.c trainer/main/dist.c
trainer_sa1b_train_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/trainer -I$(srcdir)/cli $(MPI_CFLAGS)
trainer_sa1b_train_LDADD = libsa1b-train.la libsa1b-cli.la $(SA1B_LIBS) $(OPENBLAS_LIBS) $(MPI_LIBS) -lm -lpthread
noinst_HEADERS += trainer/main/dist.h trainer/main/train.h
# dist_nccl.c: the CUDA backend's collectives (NCCL, loaded when a job
# uses it) where configure found nccl.h
if HAVE_NCCL
trainer_sa1b_train_SOURCES += trainer/main/dist_nccl.c
trainer_sa1b_train_CPPFLAGS += $(NCCL_CPPFLAGS) -DSA1B_CUDA_LIBDIR='"$(CUDA_LIBDIR)"'
endif
EXTRA_DIST += trainer/main/dist_nccl.c
noinst_HEADERS += trainer/main/dist_nccl.h
dist_man_MANS += man/sa1b-train.1
