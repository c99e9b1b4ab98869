# shard-tools/sa1b-loadbench.mk - the loader benchmark tool.
