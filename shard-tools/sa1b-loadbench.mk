# shard-tools/sa1b-loadbench.mk - the loader benchmark tool.
bin_PROGRAMS += shard-tools/sa1b-loadbench
shard_tools_sa1b_loadbench_SOURCES = shard-tools/sa1b-loadbench.c
shard_tools_sa1b_loadbench_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/shard-tools -I$(srcdir)/cli
shard_tools_sa1b_loadbench_LDADD = $(CLI_LIBS)
dist_man_MANS += man/sa1b-loadbench.1
