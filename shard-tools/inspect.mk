# shard-tools/inspect.mk - sa1b-inspect, sa1b-verify, sa1b-export.
bin_PROGRAMS += shard-tools/sa1b-inspect shard-tools/sa1b-verify
shard_tools_sa1b_inspect_SOURCES = shard-tools/sa1b-inspect.c
shard_tools_sa1b_inspect_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/shard-tools -I$(srcdir)/cli $(JANSSON_CFLAGS)
shard_tools_sa1b_inspect_LDADD = $(CLI_LIBS)
shard_tools_sa1b_verify_SOURCES = shard-tools/sa1b-verify.c
shard_tools_sa1b_verify_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/shard-tools -I$(srcdir)/cli $(JANSSON_CFLAGS)
shard_tools_sa1b_verify_LDADD = $(CLI_LIBS)
dist_man_MANS += man/sa1b-shard.5 man/sa1b-inspect.1 man/sa1b-verify.1
bin_PROGRAMS += shard-tools/sa1b-export
shard_tools_sa1b_export_SOURCES = shard-tools/sa1b-export.c
shard_tools_sa1b_export_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/shard-tools -I$(srcdir)/cli $(TURBOJPEG_CFLAGS) $(PNG_CFLAGS)
shard_tools_sa1b_export_LDADD = $(CLI_LIBS)
dist_man_MANS += man/sa1b-export.1
