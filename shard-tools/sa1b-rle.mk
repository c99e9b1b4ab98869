# shard-tools/sa1b-rle.mk - the codec on the command line.
bin_PROGRAMS += shard-tools/sa1b-rle
shard_tools_sa1b_rle_SOURCES = shard-tools/sa1b-rle.c shard-tools/rle_input.c shard-tools/rle_input.h
shard_tools_sa1b_rle_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/shard-tools -I$(srcdir)/cli $(JANSSON_CFLAGS) $(PNG_CFLAGS)
shard_tools_sa1b_rle_LDADD = $(CLI_LIBS)
dist_man_MANS += man/sa1b-rle.1
