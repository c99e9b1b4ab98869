# pipeline/loader.mk - the prefetching loader.
