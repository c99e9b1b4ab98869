# tests/input.mk - tests of tar/annotation/image input.
