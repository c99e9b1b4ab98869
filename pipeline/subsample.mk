# pipeline/subsample.mk - mask filters and subsampling strategies.
