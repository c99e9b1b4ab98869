# shard-tools/sa1b-rle.mk - the codec on the command line.
bin_PROGRAMS += shard-tools/sa1b-rle
shard_tools_sa1b_rle_SOURCES = shard-tools/sa1b-rle.c
shard_tools_sa1b_rle_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/shard-tools $(JANSSON_CFLAGS) $(PNG_CFLAGS)
shard_tools_sa1b_rle_LDADD = $(CLI_LIBS)
dist_man_MANS += man/sa1b-rle.1

# pngio: 8-bit grey/RGB PNG in and out for the programs (also sa1b-export)
libsa1b_cli_la_SOURCES += shard-tools/pngio.c
libsa1b_cli_la_CPPFLAGS = $(AM_CPPFLAGS) $(PNG_CFLAGS)
noinst_HEADERS += shard-tools/pngio.h
