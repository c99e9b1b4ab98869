# tests/sa1b-shard.mk - tests of sa1b-shard and subsampling.
