# tests/trainer.mk - tests of sa1b-train.
check_PROGRAMS += tests/test-train-grad
TESTS += tests/test-train-grad
tests_test_train_grad_SOURCES = tests/test-train-grad.c
tests_test_train_grad_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_train_grad_LDADD = $(TRAIN_LIBS)
# issue 40: the attention op's contract (dq, dk, dv written; out given; the GPU paths' lse math emulated)
check_PROGRAMS += tests/test-train-attn
TESTS += tests/test-train-attn
tests_test_train_attn_SOURCES = tests/test-train-attn.c
tests_test_train_attn_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_train_attn_LDADD = $(TRAIN_LIBS)
check_PROGRAMS += tests/test-train-optim
TESTS += tests/test-train-optim
tests_test_train_optim_SOURCES = tests/test-train-optim.c
tests_test_train_optim_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_train_optim_LDADD = $(TRAIN_LIBS)
TESTS += tests/t1700-train-torch-ref.sh tests/t1701-train-cli.sh tests/t1702-train-run.sh tests/t1703-train-shards.sh tests/t1704-train-init.sh \
	tests/t1705-train-out-dir.sh tests/t1706-train-resume-record.sh tests/t1707-train-signal.sh
EXTRA_DIST += tests/losses_agree.py tests/t1705-train-out-dir.sh tests/t1706-train-resume-record.sh tests/t1707-train-signal.sh
# the audit's data-loss defects: --dump-step's output, devices, the folder's lock, --init with --overwrite, write errors
TESTS += tests/t1708-train-dump-out.sh tests/t1709-train-dump-device.sh tests/t1710-train-out-lock.sh \
	tests/t1711-train-init-overwrite.sh tests/t1712-train-log-errors.sh tests/t1713-train-stdout.sh \
	tests/t1714-train-resume-data.sh tests/t1715-train-shard-bus.sh tests/t1716-train-step-fails.sh \
	tests/t1717-train-auto-resume.sh tests/t1718-train-slurm-recipe.sh
EXTRA_DIST += contrib/sa1b-train.sbatch
EXTRA_DIST += tests/t1708-train-dump-out.sh tests/t1709-train-dump-device.sh tests/t1710-train-out-lock.sh \
	tests/t1711-train-init-overwrite.sh tests/t1712-train-log-errors.sh tests/t1713-train-stdout.sh \
	tests/t1714-train-resume-data.sh tests/t1715-train-shard-bus.sh tests/t1716-train-step-fails.sh \
	tests/t1717-train-auto-resume.sh tests/t1718-train-slurm-recipe.sh
# issue 39: damaged samples (--skip-damaged), damaged checkpoints (resume's fallback, --from-step), a finished run and warnings
FAULT_TESTS = tests/t1725-train-skip-damaged.sh tests/t1726-train-resume-damaged.sh tests/t1727-train-finished-warn.sh
TESTS += $(FAULT_TESTS)
EXTRA_DIST += $(FAULT_TESTS)
EXTRA_DIST += tests/t1700-train-torch-ref.sh tests/t1701-train-cli.sh tests/t1702-train-run.sh tests/t1703-train-shards.sh tests/t1704-train-init.sh \
	tests/reference/sam_ref.py

check_PROGRAMS += tests/fuzz/replay-safetensors
TESTS += tests/fuzz/replay-safetensors
tests_fuzz_replay_safetensors_SOURCES = tests/fuzz/fuzz-safetensors.c tests/fuzz/replay.c tests/fuzz/fuzz_files.h
tests_fuzz_replay_safetensors_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/trainer -DFUZZ_CORPUS='"$(abs_srcdir)/tests/fuzz/corpus/safetensors"'
tests_fuzz_replay_safetensors_LDADD = $(TRAIN_LIBS)
EXTRA_DIST += tests/fuzz/corpus/safetensors
if ENABLE_FUZZING
EXTRA_PROGRAMS += tests/fuzz/fuzz-safetensors
FUZZ_TARGETS += tests/fuzz/fuzz-safetensors
tests_fuzz_fuzz_safetensors_SOURCES = tests/fuzz/fuzz-safetensors.c tests/fuzz/fuzz_files.h
tests_fuzz_fuzz_safetensors_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/trainer
tests_fuzz_fuzz_safetensors_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_safetensors_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_safetensors_LDADD = $(TRAIN_LIBS)
endif

# issue 39: hostile inputs: one-line messages, a crafted run record on --resume
TESTS += tests/t1740-hostile-messages.sh tests/t1741-train-resume-hostile.sh
EXTRA_DIST += tests/t1740-hostile-messages.sh tests/t1741-train-resume-hostile.sh
# issue 39: hostile headers: one reader (parse and peek refuse alike), one-line messages, the run record
check_PROGRAMS += tests/test-train-st-hostile
TESTS += tests/test-train-st-hostile
tests_test_train_st_hostile_SOURCES = tests/test-train-st-hostile.c
tests_test_train_st_hostile_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_train_st_hostile_LDADD = $(TRAIN_LIBS)
# issue 39: the metadata of state files (the run record), the record's
# text, and a run folder's latest and log, as --resume reads them
check_PROGRAMS += tests/fuzz/replay-checkpoint tests/fuzz/replay-runrec tests/fuzz/replay-rundir
TESTS += tests/fuzz/replay-checkpoint tests/fuzz/replay-runrec tests/fuzz/replay-rundir
tests_fuzz_replay_checkpoint_SOURCES = tests/fuzz/fuzz-checkpoint.c tests/fuzz/replay.c tests/fuzz/fuzz_files.h
tests_fuzz_replay_checkpoint_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/trainer -DFUZZ_CORPUS='"$(abs_srcdir)/tests/fuzz/corpus/checkpoint"'
tests_fuzz_replay_checkpoint_LDADD = $(TRAIN_LIBS)
tests_fuzz_replay_runrec_SOURCES = tests/fuzz/fuzz-runrec.c tests/fuzz/replay.c
tests_fuzz_replay_runrec_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/trainer -DFUZZ_CORPUS='"$(abs_srcdir)/tests/fuzz/corpus/runrec"'
tests_fuzz_replay_runrec_LDADD = $(TRAIN_LIBS)
tests_fuzz_replay_rundir_SOURCES = tests/fuzz/fuzz-rundir.c tests/fuzz/replay.c tests/fuzz/fuzz_files.h
tests_fuzz_replay_rundir_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/trainer -DFUZZ_CORPUS='"$(abs_srcdir)/tests/fuzz/corpus/rundir"'
tests_fuzz_replay_rundir_LDADD = $(TRAIN_LIBS)
EXTRA_DIST += tests/fuzz/corpus/checkpoint tests/fuzz/corpus/runrec tests/fuzz/corpus/rundir
if ENABLE_FUZZING
EXTRA_PROGRAMS += tests/fuzz/fuzz-checkpoint tests/fuzz/fuzz-runrec tests/fuzz/fuzz-rundir
FUZZ_TARGETS += tests/fuzz/fuzz-checkpoint tests/fuzz/fuzz-runrec tests/fuzz/fuzz-rundir
tests_fuzz_fuzz_checkpoint_SOURCES = tests/fuzz/fuzz-checkpoint.c tests/fuzz/fuzz_files.h
tests_fuzz_fuzz_checkpoint_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/trainer
tests_fuzz_fuzz_checkpoint_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_checkpoint_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_checkpoint_LDADD = $(TRAIN_LIBS)
tests_fuzz_fuzz_runrec_SOURCES = tests/fuzz/fuzz-runrec.c
tests_fuzz_fuzz_runrec_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/trainer
tests_fuzz_fuzz_runrec_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_runrec_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_runrec_LDADD = $(TRAIN_LIBS)
tests_fuzz_fuzz_rundir_SOURCES = tests/fuzz/fuzz-rundir.c tests/fuzz/fuzz_files.h
tests_fuzz_fuzz_rundir_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/trainer
tests_fuzz_fuzz_rundir_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_rundir_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_rundir_LDADD = $(TRAIN_LIBS)
endif

EXTRA_PROGRAMS += tests/bench/bench-train
BENCHES += tests/bench/bench-train
tests_bench_bench_train_SOURCES = tests/bench/bench-train.c
tests_bench_bench_train_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/trainer -DSRCDIR='"$(abs_srcdir)"'
tests_bench_bench_train_LDADD = $(TRAIN_LIBS)
# issue 7 part A: 16-bit conversions, accumulation, checkpointing, precision, freezing
check_PROGRAMS += tests/test-train-mem-a-half
TESTS += tests/test-train-mem-a-half
tests_test_train_mem_a_half_SOURCES = tests/test-train-mem-a-half.c
tests_test_train_mem_a_half_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_train_mem_a_half_LDADD = $(TRAIN_LIBS)

# issue 7 part B: allocator, 8-bit AdamW, meta backend, planner
check_PROGRAMS += tests/test-train-mem-b
TESTS += tests/test-train-mem-b
tests_test_train_mem_b_SOURCES = tests/test-train-mem-b.c
tests_test_train_mem_b_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_train_mem_b_LDADD = $(TRAIN_LIBS)
# issue 15: the model moves data through upload and download only
check_PROGRAMS += tests/test-train-core
TESTS += tests/test-train-core
tests_test_train_core_SOURCES = tests/test-train-core.c
tests_test_train_core_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_train_core_LDADD = $(TRAIN_LIBS)
# issue 15: out of memory in the middle of a step is an error
check_PROGRAMS += tests/test-train-oom
TESTS += tests/test-train-oom
tests_test_train_oom_SOURCES = tests/test-train-oom.c
tests_test_train_oom_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_train_oom_LDADD = $(TRAIN_LIBS)
TESTS += tests/t1760-train-mem-steady.sh
EXTRA_DIST += tests/t1760-train-mem-steady.sh
TESTS += tests/t1761-train-mem-plan.sh
EXTRA_DIST += tests/t1761-train-mem-plan.sh
check_PROGRAMS += tests/test-train-mem-a
TESTS += tests/test-train-mem-a
tests_test_train_mem_a_SOURCES = tests/test-train-mem-a.c
tests_test_train_mem_a_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_train_mem_a_LDADD = $(TRAIN_LIBS)
TESTS += tests/t1762-train-mem-adamw8bit.sh
EXTRA_DIST += tests/t1762-train-mem-adamw8bit.sh
BENCH_SH += tests/bench/bench-memory.sh
BENCH_SH_DEPS += trainer/sa1b-train shard-tools/sa1b-synth shard-tools/sa1b-shard
EXTRA_DIST += tests/bench/bench-memory.sh tests/bench/bench-lib.sh
BENCH_SH += tests/bench/bench-convergence.sh
EXTRA_DIST += tests/bench/bench-convergence.sh
# issue 18: images/s of 1 x 2 threads against 2 ranks x 1 thread, and the
# collectives' share of the step with --zero 0 and 1 (skips without MPI)
BENCH_SH += tests/bench/bench-dp.sh
EXTRA_DIST += tests/bench/bench-dp.sh tests/bench/bench-dist.c
# (and the collectives alone, under mpirun: bench-dist)
if HAVE_MPI
EXTRA_PROGRAMS += tests/bench/bench-dist
BENCH_SH_DEPS += tests/bench/bench-dist trainer/sa1b-train
tests_bench_bench_dist_SOURCES = tests/bench/bench-dist.c trainer/main/dist.c
tests_bench_bench_dist_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/trainer $(MPI_CFLAGS)
tests_bench_bench_dist_LDADD = $(TRAIN_LIBS) $(MPI_LIBS) -ldl -lpthread
if HAVE_NCCL
tests_bench_bench_dist_SOURCES += trainer/main/dist_nccl.c
tests_bench_bench_dist_CPPFLAGS += $(NCCL_CPPFLAGS) -DSA1B_CUDA_LIBDIR='"$(CUDA_LIBDIR)"'
endif
endif
# (by hand: builds an older commit beside this one)
EXTRA_DIST += tests/bench/bench-core.sh tests/bench/st_tensors.py
TESTS += tests/t1750-train-mem-a.sh
EXTRA_DIST += tests/t1750-train-mem-a.sh
TESTS += tests/t1780-train-attention.sh tests/t1790-train-learns.sh
EXTRA_DIST += tests/t1780-train-attention.sh tests/t1790-train-learns.sh
TESTS += tests/t1763-train-mem-bf16.sh
EXTRA_DIST += tests/t1763-train-mem-bf16.sh
TESTS += tests/t1764-train-mem-limit.sh
EXTRA_DIST += tests/t1764-train-mem-limit.sh
TESTS += tests/t1765-train-mem-plan-stages.sh
EXTRA_DIST += tests/t1765-train-mem-plan-stages.sh
TESTS += tests/t1770-train-dp.sh
EXTRA_DIST += tests/t1770-train-dp.sh tests/lsan-mpi.supp tests/mpi-count.c
# t1770's count of the floats each MPI collective moved (a PMPI shim the
# ranks preload)
if HAVE_MPI
check_LTLIBRARIES += tests/libmpicount.la
tests_libmpicount_la_SOURCES = tests/mpi-count.c
tests_libmpicount_la_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS)
tests_libmpicount_la_LIBADD = $(MPI_LIBS)
tests_libmpicount_la_LDFLAGS = -module -avoid-version -shared -rpath $(abs_builddir)/tests
endif
check_PROGRAMS += tests/test-train-typed
TESTS += tests/test-train-typed
tests_test_train_typed_SOURCES = tests/test-train-typed.c
tests_test_train_typed_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_train_typed_LDADD = $(TRAIN_LIBS)
# the CUDA backend against the CPU's (skips without CUDA or a device)
check_PROGRAMS += tests/test-train-cuda
TESTS += tests/test-train-cuda
tests_test_train_cuda_SOURCES = tests/test-train-cuda.c
tests_test_train_cuda_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_train_cuda_LDADD = $(TRAIN_LIBS)
# issue 18: a job on the CUDA backend under mpirun without a device ends
# in one line; with one (gpu-check), the NCCL path at one rank
TESTS += tests/t1771-train-dp-nodevice.sh tests/t1772-train-dp-cuda.sh tests/t1773-train-cuda-profile.sh
EXTRA_DIST += tests/t1771-train-dp-nodevice.sh tests/t1772-train-dp-cuda.sh tests/t1773-train-cuda-profile.sh
# the host side of the NCCL collectives, on a stand-in libnccl.so.2 (a
# shared object named so: -version-info 2:0:0) and CUDA runtime
if HAVE_NCCL
check_LTLIBRARIES += tests/libnccl.la
tests_libnccl_la_SOURCES = tests/fake-nccl.c
tests_libnccl_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests $(NCCL_CPPFLAGS)
tests_libnccl_la_LDFLAGS = -shared -rpath $(abs_builddir)/tests -version-info 2:0:0
check_PROGRAMS += tests/test-dist-nccl
TESTS += tests/test-dist-nccl
tests_test_dist_nccl_SOURCES = tests/test-dist-nccl.c trainer/main/dist.c trainer/main/dist_nccl.c
tests_test_dist_nccl_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer $(MPI_CFLAGS) $(NCCL_CPPFLAGS) \
	-DSA1B_CUDA_LIBDIR='"$(abs_builddir)/tests/.libs"'
tests_test_dist_nccl_LDADD = $(MPI_LIBS) -ldl -lpthread
EXTRA_tests_test_dist_nccl_DEPENDENCIES = tests/libnccl.la
endif
EXTRA_DIST += tests/fake-nccl.c tests/fake-nccl.h tests/test-dist-nccl.c
# cuDNN's SDPA attention without a GPU (issue 40): the layout given to
# cuDNN against the CPU backend (every build), the real libcudnn as far as
# it goes without a device, and a stand-in libcudnn (libfakecudnn.so,
# loaded by its path)
check_PROGRAMS += tests/test-cudnn-attn
TESTS += tests/test-cudnn-attn
tests_test_cudnn_attn_SOURCES = tests/test-cudnn-attn.c
tests_test_cudnn_attn_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_cudnn_attn_LDADD = $(TRAIN_LIBS) -ldl
if HAVE_CUDNN
check_LTLIBRARIES += tests/libfakecudnn.la
tests_libfakecudnn_la_SOURCES = tests/fake-cudnn.c
tests_libfakecudnn_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -isystem $(CUDA_INCDIR)
tests_libfakecudnn_la_LDFLAGS = -shared -rpath $(abs_builddir)/tests -avoid-version -module
tests_test_cudnn_attn_CPPFLAGS += -DFAKE_CUDNN='"$(abs_builddir)/tests/.libs/libfakecudnn.so"'
EXTRA_tests_test_cudnn_attn_DEPENDENCIES = tests/libfakecudnn.la
endif
EXTRA_DIST += tests/fake-cudnn.c tests/fake-cudnn.h tests/test-cudnn-attn.c
# masks empty at R: not trained on, left out of the evaluation and counted (issue 39)
TESTS += tests/t1720-train-empty-masks.sh
EXTRA_DIST += tests/t1720-train-empty-masks.sh
# the CUDA attention's choice, its parts that need no GPU (backend_cuda_pick.h)
check_PROGRAMS += tests/test-attn-pick
TESTS += tests/test-attn-pick
tests_test_attn_pick_SOURCES = tests/test-attn-pick.c
tests_test_attn_pick_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_attn_pick_LDADD = $(TRAIN_LIBS)
# one case of scripts/gpu-check attn (a shape on a path, in its own process)
check_PROGRAMS += tests/gpu-attn-case
tests_gpu_attn_case_SOURCES = tests/gpu-attn-case.c
tests_gpu_attn_case_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_gpu_attn_case_LDADD = $(TRAIN_LIBS)
# auto's start-up check of the CUDA attention on a device (skips without one)
check_PROGRAMS += tests/test-attn-choose-cuda
TESTS += tests/test-attn-choose-cuda
tests_test_attn_choose_cuda_SOURCES = tests/test-attn-choose-cuda.c
tests_test_attn_choose_cuda_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_attn_choose_cuda_LDADD = $(TRAIN_LIBS)
