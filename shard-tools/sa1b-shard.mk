# shard-tools/sa1b-shard.mk - tars in, shards out.
