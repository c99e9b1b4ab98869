# tests/trainer.mk - tests of sa1b-train.
