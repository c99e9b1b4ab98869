"""losses_agree.py LOG_A LOG_B N TOL - the "loss" fields of two log.jsonl
files: N lines each, and every pair within TOL relative; prints both lists
as a TAP comment, exits 1 when they disagree."""
import json
import sys

a, b = ([json.loads(line)["loss"] for line in open(p)] for p in sys.argv[1:3])
n, tol = int(sys.argv[3]), float(sys.argv[4])
print("# losses", a, b)
sys.exit(0 if len(a) == len(b) == n and all(abs(x - y) <= tol * abs(x) for x, y in zip(a, b)) else 1)
