# pipeline/shard.mk - shard writer and reader.
