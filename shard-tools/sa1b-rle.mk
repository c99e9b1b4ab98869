# shard-tools/sa1b-rle.mk - the codec on the command line.
