# pipeline/loader.mk - the prefetching loader.
sa1binclude_HEADERS += pipeline/sa1b_loader.h
