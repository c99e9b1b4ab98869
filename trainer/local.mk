# trainer/local.mk - sa1b-train and its backends.
if HAVE_CUDA
CUDA_PROBE_SRC = trainer/cuda_probe.cu
else
CUDA_PROBE_SRC = trainer/cuda_probe_stub.c
endif
EXTRA_DIST += trainer/cuda_probe.cu trainer/cuda_probe_stub.c
noinst_HEADERS += trainer/cuda_probe.h
