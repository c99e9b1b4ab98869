# tests/rle.mk - tests, fuzz replay and bench of the RLE codec and sa1b-rle.
