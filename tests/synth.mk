# tests/synth.mk - tests of sa1b-synth.
