# pipeline/shard.mk - shard writer and reader.
sa1binclude_HEADERS += pipeline/sa1b_shard.h
