# shard-tools/local.mk - the data-side programs (their helper library is
# cli/); one fragment per program.
include shard-tools/sa1b-rle.mk
include shard-tools/sa1b-synth.mk
include shard-tools/sa1b-shard.mk
include shard-tools/inspect.mk
include shard-tools/sa1b-loadbench.mk
