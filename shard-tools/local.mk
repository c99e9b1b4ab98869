# shard-tools/local.mk - the data-side programs and their private helper
# library (command line, messages, progress bar); one fragment per program.
noinst_LTLIBRARIES += libsa1b-cli.la
libsa1b_cli_la_SOURCES = shard-tools/cli.c shard-tools/cli.h
CLI_LIBS = libsa1b-cli.la $(SA1B_LIBS)
include shard-tools/sa1b-rle.mk
include shard-tools/sa1b-synth.mk
include shard-tools/sa1b-shard.mk
include shard-tools/inspect.mk
include shard-tools/sa1b-loadbench.mk
