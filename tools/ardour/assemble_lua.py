#!/usr/bin/env python3
"""Assembles one of Stembridge's Ardour scripts: Ardour's script loader has no `require`, so
the line "-- @include sb_common.lua" is replaced by that file, and @BINDIR@ by where the
stembridge command is installed.
usage: assemble_lua.py SCRIPT.lua COMMON.lua BINDIR OUT.lua"""
import sys

script, common, bindir, out = sys.argv[1:5]
text = open(script, encoding="utf-8").read()
lib = open(common, encoding="utf-8").read()
marker = "-- @include sb_common.lua\n"
if text.count(marker) != 1:
    sys.exit(f"{script}: needs exactly one line '{marker.strip()}'")
text = text.replace(marker, lib).replace("@BINDIR@", bindir)
with open(out, "w", encoding="utf-8") as f:
    f.write(text)
