# tests/loader.mk - tests of the loader and sa1b-loadbench.
