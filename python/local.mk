# python/local.mk - the sa1b Python package: its extension built by this
# build (a libtool module over the core library), staged with the package's
# .py files into python/stage/ for the tests, which run in a virtual
# environment (python/venv, --system-site-packages, pycocotools from PyPI
# when it is reachable).  Users install the package with pip install ./python.
PY_PACKAGE = python/sa1b/__init__.py python/sa1b/mask.py python/sa1b/torch.py
PY_TESTS = tests/t1880-python-mask.sh tests/t1881-python-shard.sh tests/t1882-python-loader.sh \
	tests/t1883-python-torch.sh tests/t1884-python-pip.sh tests/t1885-python-rle.sh \
	tests/t1886-python-torch-cuda.sh tests/t1887-python-fuzz-replay.sh tests/t1888-python-fuzz-atheris.sh \
	tests/t1889-python-messages.sh
PY_TEST_FILES = python/tests/tap.py python/tests/py-lib.sh python/tests/make-venv.sh python/tests/lsan.supp \
	python/tests/test_mask.py python/tests/test_shard.py python/tests/test_loader.py \
	python/tests/test_torch.py python/tests/test_rle.py python/tests/test_torch_cuda.py \
	tests/fuzz/fuzz_mask.py tests/fuzz/corpus/python
EXTRA_DIST += $(PY_PACKAGE) $(PY_TESTS) $(PY_TEST_FILES) python/setup.py python/pyproject.toml \
	python/.gitignore python/README.md python/bench/bench_mask.py tests/bench/bench-python.sh \
	python/examples/train_torch.py python/bench/bench_loader.py
TESTS += $(PY_TESTS)

if HAVE_PYEXT
noinst_LTLIBRARIES += python/_sa1b.la
python__sa1b_la_SOURCES = python/src/sa1bpy.h python/src/module.c python/src/mask.c \
	python/src/shard.c python/src/loader.c
python__sa1b_la_CPPFLAGS = $(AM_CPPFLAGS) $(PYEXT_CPPFLAGS)
# -rpath makes libtool build the (never installed) module as a shared object
python__sa1b_la_LDFLAGS = -module -avoid-version -shared -rpath $(abs_builddir)/python
python__sa1b_la_LIBADD = $(SA1B_LIBS)

check_DATA = python/stage.stamp python/venv.stamp
# make bench: sa1b.mask against pycocotools.mask, sa1b.torch against webdataset
BENCH_SH += tests/bench/bench-python.sh
BENCH_SH_DEPS += python/stage.stamp python/venv.stamp shard-tools/sa1b-shard shard-tools/sa1b-synth
python/stage.stamp: python/_sa1b.la $(PY_PACKAGE)
	$(AM_V_GEN)rm -rf python/stage && $(MKDIR_P) python/stage/sa1b && \
	for f in $(PY_PACKAGE); do cp $(srcdir)/$$f python/stage/sa1b/ || exit 1; done && \
	cp python/.libs/_sa1b.so python/stage/sa1b/_sa1b$(PYEXT_SUFFIX) && touch $@
python/venv.stamp: $(srcdir)/python/tests/make-venv.sh
	$(AM_V_GEN)$(SHELL) $(srcdir)/python/tests/make-venv.sh '$(PYEXT_PYTHON)' python/venv && touch $@
endif
CLEANFILES += python/stage.stamp
clean-local: clean-local-python
clean-local-python:
	-rm -rf python/stage
distclean-local: distclean-local-python
distclean-local-python:
	-rm -rf python/venv python/venv.stamp
.PHONY: clean-local-python distclean-local-python
