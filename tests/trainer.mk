# tests/trainer.mk - tests of sa1b-train.
check_PROGRAMS += tests/test-train-grad
TESTS += tests/test-train-grad
tests_test_train_grad_SOURCES = tests/test-train-grad.c
tests_test_train_grad_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests -I$(srcdir)/trainer
tests_test_train_grad_LDADD = $(TRAIN_LIBS)
