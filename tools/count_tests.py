#!/usr/bin/env python3
"""Counts meson testlog.json files (one JSON per line): lists each skipped test with the reason
it printed and each failed one with its result, log file, FAIL lines and last lines; then ends
with the plain line "N passed, N failed" that CI reads (a skip is neither; a run that tested
nothing shows as "0 passed")."""
import json
import sys

passed = failed = 0
skips = []
fails = []
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
            fails.append(f"failed: {t.get('name', '?')} ({r or 'no result'}, {path})")
            # CI may show only the end of its log: the failed test's first lines that say FAIL
            # and its last lines go there too
            text = (t.get("stdout") or "") + "\n" + (t.get("stderr") or "")
            out = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
            said = [ln for ln in out[:-4] if "FAIL" in ln][:6]
            fails += [f"    {ln[:200]}" for ln in said + out[-4:]]
for s in skips:
    print(s)
for s in fails:
    print(s)
print(f"{passed} passed, {failed} failed")
