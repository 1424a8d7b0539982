#!/usr/bin/env python3
"""Writes the `ui_scripts` file through which Ardour 7.3 restores an EditorHook at start-up
(after the tested pattern in ../shared/ardour/gui-import).
usage: gui_ui_scripts.py HOOK.lua OUT_ui_scripts
Ardour's LuaCallback restores a base64 Lua payload `s = {n=name, s=source, f=factory, a=args}`
and calls load(s.f)(s.a); f may be source text that returns the hook's callback. The hook runs
on LuaTimerS: in 7.3 signals is a 51-bit string, LuaTimerS is bit 48."""
import base64
import re
import sys

src = open(sys.argv[1]).read()
name = re.search(r'name\s*=\s*"([^"]*)"', src).group(1)
factory = "local function ardour () end\n" + src + "\nreturn factory (...)\n"


def long_string(text):
    level = 0
    while "]" + "=" * level + "]" in text:
        level += 1
    return "[" + "=" * level + "[\n" + text + "]" + "=" * level + "]"


payload = "s = {} s['n'] = %s s['s'] = %s s['f'] = %s s['a'] = {} " % (
    long_string(name), long_string(src), long_string(factory))
N_SIGNALS, TIMER_S = 51, 48
signals = "".join("1" if N_SIGNALS - 1 - i == TIMER_S else "0" for i in range(N_SIGNALS))
with open(sys.argv[2], "w") as f:
    f.write('<?xml version="1.0" encoding="UTF-8"?>\n<UIScripts>\n  <ActionHooks>\n'
            '    <LuaCallback lua="Lua 5.3" id="987654321" name="%s" signals="%s">%s</LuaCallback>\n'
            '  </ActionHooks>\n</UIScripts>\n'
            % (name, signals, base64.b64encode(payload.encode()).decode()))
