# pipeline/input.mk - tar streaming, SA-1B annotation parsing, JPEG decode/resize.
