# shard-tools/sa1b-synth.mk - synthetic SA-1B tars.
