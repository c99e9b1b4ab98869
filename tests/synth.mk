# tests/synth.mk - tests of sa1b-synth: command line, determinism, the SA-1B
# format in every detail (synth_check.py), output errors.
SYNTH_TESTS = tests/t1200-synth-cli.sh tests/t1201-synth-determinism.sh tests/t1202-synth-format.sh \
	tests/t1203-synth-output.sh tests/t1204-synth-fullsize.sh tests/t1205-synth-codec.sh \
	tests/t1206-synth-nesting.sh tests/t1207-synth-sizes.sh
TESTS += $(SYNTH_TESTS)
EXTRA_DIST += $(SYNTH_TESTS) tests/synth_check.py
# the colours of sa1b-synth's scenes and sa1b-export's overlays (cli/palette.h)
check_PROGRAMS += tests/test-palette
TESTS += tests/test-palette
tests_test_palette_SOURCES = tests/test-palette.c
tests_test_palette_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/cli
tests_test_palette_LDADD = libsa1b-cli.la -lm
