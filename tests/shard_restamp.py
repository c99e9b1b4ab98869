#!/usr/bin/python3
"""shard_restamp.py - rewrites the "version" of a shard's provenance in place
(same length: "0.1.0" becomes "9.9.9" digit for digit), fixing the
provenance, header and footer CRC32Cs, as a shard made by another version of
sa1b-shard would have it.  For the --skip-existing tests.
With --before-empty it blanks the options' "keep_empty_masks" instead (the
same length in spaces), as a shard made before sa1b-shard dropped the masks
empty at R has its options.  With --replace OLD NEW it replaces the first
OLD of the provenance's text by NEW, of the same length.
Usage: shard_restamp.py [--before-empty | --replace OLD NEW] FILE.shard"""
import struct
import sys

POLY = 0x82F63B78
TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ POLY if c & 1 else c >> 1
    TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283
before_empty = sys.argv[1] == "--before-empty"
path = sys.argv[-1]
d = bytearray(open(path, "rb").read())
po, pl = struct.unpack_from("<QQ", d, 56)
prov = d[po:po + pl].decode()
if sys.argv[1] == "--replace":
    old, new = sys.argv[2], sys.argv[3]
    if len(old.encode()) != len(new.encode()) or old not in prov:
        sys.exit("shard_restamp.py: --replace needs OLD in the provenance and NEW of its length")
    at = prov.index(old)
    d[po + at:po + at + len(old.encode())] = new.encode()
elif before_empty:
    key = '"keep_empty_masks":'
    at = prov.index(key)
    end = prov.index(",", at) + 1  # (the key is never the options' last)
    d[po + at:po + end] = b" " * (end - at)
else:
    key = '"version":"'
    at = prov.index(key) + len(key)
    end = prov.index('"', at)
    new = "".join("9" if ch.isdigit() else ch for ch in prov[at:end])
    if new == prov[at:end]:
        sys.exit("shard_restamp.py: the version has no digit to change")
    d[po + at:po + end] = new.encode()
struct.pack_into("<I", d, 120, crc32c(d[po:po + pl]))
struct.pack_into("<I", d, 252, crc32c(d[0:252]))
f = len(d) - 64
struct.pack_into("<I", d, f + 56, struct.unpack_from("<I", d, 252)[0])
struct.pack_into("<I", d, f + 60, crc32c(d[f:f + 60]))
open(path, "wb").write(d)
