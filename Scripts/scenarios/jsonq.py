"""Reads JSON lines on stdin. `jsonq.py EXPR` prints EXPR evaluated with `j` (the last object)
and `lines` (all objects); `jsonq.py --check` exits 1 unless every line is one JSON object."""
import json
import sys

raw = [l for l in sys.stdin.read().split("\n") if l != ""]
if sys.argv[1] == "--check":
    try:
        ok = bool(raw) and all(isinstance(json.loads(l), dict) for l in raw)
    except ValueError:
        ok = False
    sys.exit(0 if ok else 1)
lines = [json.loads(l) for l in raw]
j = lines[-1] if lines else None
value = eval(sys.argv[1], {"j": j, "lines": lines, "len": len, "set": set, "sorted": sorted, "all": all, "any": any})
print(json.dumps(value) if not isinstance(value, str) else value)
