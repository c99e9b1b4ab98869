# cli/local.mk - the programs' private helper library (command line,
# messages, progress bar, temporary outputs, PNG in and out, colours), used
# by the data-side programs of shard-tools/ and by the trainer alike.
noinst_LTLIBRARIES += libsa1b-cli.la
libsa1b_cli_la_SOURCES = cli/cli.c cli/palette.c cli/pngio.c
libsa1b_cli_la_CPPFLAGS = $(AM_CPPFLAGS) $(PNG_CFLAGS)
noinst_HEADERS += cli/cli.h cli/palette.h cli/pngio.h
CLI_LIBS = libsa1b-cli.la $(SA1B_LIBS)
