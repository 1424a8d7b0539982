#!/usr/bin/env python3
"""The knobs: every environment variable Stembridge reads is in the engine's one table
(engine/core/knobs.c, listed by knob_list), every one of them is in man/stembridge.1's
ENVIRONMENT section, and nothing in the sources reads the environment but that table.

usage: test_knobs.py KNOB_LIST SOURCE_ROOT
"""
import os
import re
import subprocess
import sys

lister, root = sys.argv[1], sys.argv[2]
failures = []
rows = [l.split("\t") for l in subprocess.run([lister], capture_output=True, text=True,
                                                check=True).stdout.splitlines()]
names = [r[0] for r in rows]
if len(names) != len(set(names)):
    failures.append(f"a name twice in the table: {names}")
for r in rows:
    if len(r) != 4 or not r[2] or not r[3]:
        failures.append(f"{r[0]}: no owner or meaning")

man = open(os.path.join(root, "man", "stembridge.1")).read()
env = man.split(".SH ENVIRONMENT", 1)[1].split("\n.SH ", 1)[0] if ".SH ENVIRONMENT" in man else ""
for n in names:
    if not re.search(r"(?<![A-Z_])" + re.escape(n) + r"(?![A-Z_])", env):
        failures.append(f"{n} is not in man/stembridge.1's ENVIRONMENT")

# the sources read the environment through the table alone
for top in ("engine", "plugin", "gui", "tools"):
    for d, _, files in os.walk(os.path.join(root, top)):
        for f in files:
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, root)
            text = open(path, errors="replace").read()
            if rel != os.path.join("engine", "core", "knobs.c") and re.search(r"\bgetenv\s*\(", text):
                failures.append(f"{rel} calls getenv (read a knob through sb_knob_get)")
            for n in re.findall(r'sb_knob_get\("([A-Z_0-9]+)"\)', text):
                if n not in names:
                    failures.append(f"{rel} reads {n}, which is not in the table")

for f in failures:
    print("FAIL:", f)
print(f"knobs: {len(names)} in the table and the man page, {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
