# shard-tools/inspect.mk - sa1b-inspect, sa1b-verify, sa1b-export.
