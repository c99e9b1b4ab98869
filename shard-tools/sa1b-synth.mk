# shard-tools/sa1b-synth.mk - synthetic SA-1B tars: scenes with exact masks
# (synth_scene.c) dressed as SA-1B annotation files in a tar (sa1b-synth.c).
bin_PROGRAMS += shard-tools/sa1b-synth
shard_tools_sa1b_synth_SOURCES = shard-tools/sa1b-synth.c shard-tools/synth_scene.c shard-tools/synth_scene.h
shard_tools_sa1b_synth_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/shard-tools -I$(srcdir)/cli $(ARCHIVE_CFLAGS) $(JANSSON_CFLAGS) $(TURBOJPEG_CFLAGS)
shard_tools_sa1b_synth_LDADD = $(CLI_LIBS)
dist_man_MANS += man/sa1b-synth.1
