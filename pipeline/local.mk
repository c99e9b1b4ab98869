# pipeline/local.mk - the data path of libsa1b; one fragment per component.
include pipeline/input.mk
include pipeline/shard.mk
include pipeline/prep.mk
include pipeline/loader.mk
