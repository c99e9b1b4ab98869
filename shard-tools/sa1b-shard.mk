# shard-tools/sa1b-shard.mk - tars in, shards out.
bin_PROGRAMS += shard-tools/sa1b-shard
shard_tools_sa1b_shard_SOURCES = shard-tools/sa1b-shard.c
shard_tools_sa1b_shard_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/shard-tools -I$(srcdir)/cli $(JANSSON_CFLAGS) $(ARCHIVE_CFLAGS) $(TURBOJPEG_CFLAGS)
shard_tools_sa1b_shard_LDADD = $(CLI_LIBS)
dist_man_MANS += man/sa1b-shard.1
