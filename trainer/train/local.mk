# trainer/train/local.mk - what training adds to the model: the optimizer,
# checkpoints, the run folder, the memory planner.
libsa1b_train_la_SOURCES += trainer/train/optim.c trainer/train/checkpoint.c trainer/train/run_dir.c \
	trainer/train/plan.c
noinst_HEADERS += trainer/train/optim.h trainer/train/checkpoint.h trainer/train/run_dir.h trainer/train/plan.h
