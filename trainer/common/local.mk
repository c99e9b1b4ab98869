# trainer/common/local.mk - what every room of the trainer uses: the
# allocator, precision, element math, 8-bit blocks, safetensors, the RNG,
# the address-space limit.
libsa1b_train_la_SOURCES += trainer/common/alloc.c trainer/common/safetensors.c trainer/common/vmlimit.c
noinst_HEADERS += trainer/common/alloc.h trainer/common/precision.h trainer/common/kernels.h trainer/common/quant8.h \
	trainer/common/safetensors.h trainer/common/tr_rng.h trainer/common/vmlimit.h trainer/common/quote.h
# byte counts ("16G") of the size options
libsa1b_train_la_SOURCES += trainer/common/bytes.c
noinst_HEADERS += trainer/common/bytes.h
