# trainer/backend/cpu/local.mk - the CPU backend, its thread pool and the
# fp32 widening of 16-bit operands (which the meta backend shares).
libsa1b_train_la_SOURCES += trainer/backend/cpu/backend_cpu.c trainer/backend/cpu/backend_widen.c \
	trainer/backend/cpu/pool.c
noinst_HEADERS += trainer/backend/cpu/backend_cpu.h trainer/backend/cpu/backend_widen.h trainer/backend/cpu/pool.h
