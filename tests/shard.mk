# tests/shard.mk - tests of the shard format, reader and inspect/verify/export.
