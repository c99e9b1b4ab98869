# pipeline/shard.mk - shard writer and reader.
libsa1b_core_la_SOURCES += pipeline/shard_writer.c pipeline/shard_reader.c pipeline/shard_runs.c pipeline/shard_resample.c pipeline/crc32c.c
sa1binclude_HEADERS += pipeline/sa1b_shard.h
noinst_HEADERS += pipeline/shard_format.h pipeline/nt_store.h pipeline/crc32c_internal.h
