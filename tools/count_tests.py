#!/usr/bin/env python3
"""Counts meson testlog.json files (one JSON per line): lists each skipped test with the reason
it printed, then ends with the plain line "N passed, N failed" that CI reads (a skip is neither;
a run that tested nothing shows as "0 passed")."""
import json
import sys

passed = failed = 0
skips = []
for path in sys.argv[1:]:
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        print(f"no test log {path}: {e}", file=sys.stderr)
        failed += 1
        continue
    for line in lines:
        if not line.strip():
            continue
        t = json.loads(line)
        r = t.get("result", "")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            out = [ln.strip() for ln in (t.get("stdout") or "").splitlines() if ln.strip()]
            why = next((ln for ln in reversed(out) if "skip" in ln.lower()), out[-1] if out else "")
            skips.append(f"skipped: {t.get('name', '?')}: {why or 'no reason printed'}")
        else:
            failed += 1
for s in skips:
    print(s)
print(f"{passed} passed, {failed} failed")
