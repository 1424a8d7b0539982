#!/usr/bin/env python3
"""The plugin and its UI in a real host window under Xvfb (ui_host: lilv + suil, the way Ardour,
Carla and jalv embed an X11 UI), used as a person would: xdotool moves the pointer, clicks and
types. The window describes what it drew where (its _STEMBRIDGE_LAYOUT property: each part, each
text with its box and its ink), so the test finds its buttons by name and checks what a person
would see; screenshots (PNG) of every state at 1x and 2x go to OUT_DIR.

Each state (idle, the device list, recording, separating, done with stems, auditioning, a
tooltip, the keyboard's focus, a silent take, a missing model, a failed take and the next one,
a fallback, narrow and resized, zoomed) is checked for what matters there, and every screenshot
for text inside its box. It fails when the take lane is empty after a take, when a stale error
survives a new take, when text runs outside its box, or when the audition buttons do not set the
control the plugin reads (the plugin then plays the stem: the output differs from the input).

Usage: ui_xvfb_test.py UI_HOST OUT_DIR      (LV2_PATH must point at the build's lv2 folder)
Exit 0 pass, 1 fail, 77 skipped (Xvfb, xdotool, ImageMagick's import/convert or sordi missing).
"""
import os
import queue
import re
import shutil
import stat
import subprocess
import sys
import threading
import time

from xvfb_common import Layout, check, fails, ink_fraction, start_xvfb

HOST, OUT = sys.argv[1], os.path.abspath(sys.argv[2])
TOOLS = ["Xvfb", "xdotool", "import", "convert", "sordi"]
missing = [t for t in TOOLS if not shutil.which(t)]
if missing:
    print("skipped: missing " + ", ".join(missing))
    sys.exit(77)
shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)

BASE_W, BASE_H = 600, 600  # gui/ui_layout.h: SBUI_BASE_W, SBUI_BASE_H
PORT_RECORD, PORT_DEVICE, PORT_MODEL, PORT_AUDITION = 2, 3, 5, 10
PORT_PRECISION = 24  # the stereo plugin's Precision control (ttl: symbol "precision")
PORT_KEEP_TAKE = 25  # its Keep take audio control (ttl: symbol "keep_take")
STATE_RECORDING, STATE_SEPARATING, STATE_DONE, STATE_ERROR, STATE_SILENT = 1, 3, 4, 5, 6
PANEL = "#24282e"   # the lane's ground (gui/ui_draw.c)

class Host:
    """ui_host with its stdout read on a thread, so the test can wait for a line."""

    def __init__(self, env, scale):
        self.p = subprocess.Popen([HOST] + str(scale).split(), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, env=env, text=True, bufsize=1)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def send(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()

    def expect(self, pattern, timeout=10.0):
        end = time.time() + timeout
        while time.time() < end:
            try:
                line = self.lines.get(timeout=max(0.01, end - time.time()))
            except queue.Empty:
                break
            if line is None:
                break
            m = re.match(pattern, line)
            if m:
                return m
        return None

    def ask(self, cmd, pattern, timeout=10.0):
        self.send(cmd)
        return self.expect(pattern, timeout)

    def status(self):
        m = self.ask("status", r"STATUS device (\S+) state (\S+) jobs (\S+) device_out (\S+) "
                               r"fallback (\S+) devices (-?\d+) audition (\S+) record (\S+) "
                               r"model (\S+)")
        keys = ("device", "state", "jobs", "device_out", "fallback")
        if not m:
            return None
        d = {k: float(m.group(i + 1)) for i, k in enumerate(keys)}
        d.update(devices=int(m.group(6)), audition=float(m.group(7)), record=float(m.group(8)),
                 model=float(m.group(9)))
        return d

    def layout(self):
        self.send("layout")
        if not self.expect(r"^LAYOUT$"):
            return Layout("")
        lines = []
        while True:
            try:
                line = self.lines.get(timeout=5)
            except queue.Empty:
                break
            if line is None or line == "END":
                break
            lines.append(line)
        return Layout("\n".join(lines))

    def geometry(self):
        return tuple(int(v) for v in self.ask("geometry", r"GEOMETRY (\S+) (\S+) (\S+) (\S+)")
                     .groups())

    def close(self):
        try:
            self.send("quit")
            return self.p.wait(timeout=20)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            self.p.kill()
            return -1


def xdo(env, *args):
    subprocess.run(["xdotool", *args], env=env, check=True)


def point(env, geo, x, y):
    xdo(env, "mousemove", str(int(geo[0] + x)), str(int(geo[1] + y)))


def park(env, geo):
    """The pointer out of the way (no hover, no tooltip)."""
    xdo(env, "mousemove", str(geo[0] + geo[2] + 40), str(geo[1] + geo[3] + 40))


def click_at(env, geo, x, y, button=1):
    point(env, geo, x, y)
    time.sleep(0.08)
    xdo(env, "click", str(button))


def click(env, geo, h, name, button=1):
    lay = h.layout()
    w = lay.widgets.get(name)
    if not check(w is not None, "the window shows '%s'" % name):
        return False
    (x, y, wd, ht), _ = w
    click_at(env, geo, x + wd / 2, y + ht / 2, button)
    return True


def key(env, *keys):
    xdo(env, "key", "--delay", "60", *keys)


def screenshot(env, geo, name):
    path = os.path.join(OUT, name)
    subprocess.run(["import", "-window", "root", "-crop",
                    "%dx%d+%d+%d" % (geo[2], geo[3], geo[0], geo[1]), "+repage", path],
                   env=env, check=True)
    print("screenshot", path, flush=True)
    return path


def check_texts(lay, what):
    """Every text inside its box and the window; no box outside the window."""
    win_w, win_h = lay.window[0], lay.window[1]
    bad = []
    for name, box, ink, text in lay.texts:
        bx, by, bw, bh = box
        ix, iy, iw, ih = ink
        tol = 1.0
        if (iw > 0 and (ix < bx - tol or ix + iw > bx + bw + tol or iy < by - tol or
                        iy + ih > by + bh + tol)) or bx < -tol or by < -tol or \
                bx + bw > win_w + tol or by + bh > win_h + tol:
            bad.append("%s '%s' ink %s box %s" % (name, text, ink, box))
    check(not bad and len(lay.texts) > 5,
          "%s: %d texts, each inside its box and the window%s" %
          (what, len(lay.texts), (": " + "; ".join(bad[:3])) if bad else ""))


def shot(env, geo, h, name, what):
    """A screenshot, and its texts checked."""
    time.sleep(0.25)
    path = screenshot(env, geo, name)
    lay = h.layout()
    check_texts(lay, what)
    return path, lay


def lane_check(env, geo, h, path, lay, what, want_wave=True):
    """The take lane shows the take (or nothing, before one): ink in the lane's inside."""
    w = lay.widgets.get("lane")
    if not check(w is not None, "%s: the window shows the take lane" % what):
        return
    (x, y, wd, ht), _ = w
    s = lay.window[2]
    inner = (x + 6 * s, y + 6 * s, wd - 12 * s, ht - 12 * s)
    f = ink_fraction(path, inner, PANEL)
    if want_wave:
        check(f > 0.12, "%s: the take lane shows the take's waveform (%.0f %% inked)" % (what, 100 * f))
    else:
        check(0 <= f < 0.12, "%s: the take lane is empty before a take (%.0f %% inked)" %
              (what, 100 * f))


def wait_state(h, states, timeout=120, jobs=None, poll=0.1):
    end = time.time() + timeout
    st = h.status()
    while st and time.time() < end:
        if st["state"] in states and (jobs is None or st["jobs"] >= jobs):
            return st
        time.sleep(poll)
        st = h.status()
    return st


def wait_write(h, port, timeout=5.0):
    m = h.expect(r"UI_WRITE %d (\S+)" % port, timeout)
    return float(m.group(1)) if m else None


def saved_state(h, name):
    """Saves the running instance's state; returns the Turtle as N-Triples."""
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    if not h.ask("save " + d, r"SAVED (.*)"):
        return ""
    return subprocess.run(["sordi", "-i", "turtle", "-o", "ntriples",
                           os.path.join(d, "state.ttl"), "file://" + d + "/"],
                          capture_output=True, text=True).stdout


def port_in_state(nt, symbol):
    node = re.search(r'(_:\S+) <http://lv2plug.in/ns/lv2core#symbol> "%s" \.' % symbol, nt)
    if not node:
        return None
    v = re.search(re.escape(node.group(1)) + r' <http://lv2plug.in/ns/ext/presets#value> "([^"]+)"',
                  nt)
    return float(v.group(1)) if v else None


def record(h, seconds, start, during=None):
    """Arms Record (from the host: the button is tried elsewhere), rolls from sample start,
    calls during() while recording, and disarms."""
    h.ask("set %d 1" % PORT_RECORD, r"SET")
    time.sleep(0.1)
    h.ask("roll %g %d" % (seconds, start), r"ROLLING")
    t = time.time()
    if during:
        during()
    time.sleep(max(0.0, seconds + 0.1 - (time.time() - t)))
    h.ask("set %d 0" % PORT_RECORD, r"SET")


def tour(env, h, geo, scale, tag):
    """Every state a user meets, with its screenshot at this scale."""
    s = scale
    st = h.status()
    end = time.time() + 30
    while st and st["devices"] < 0 and time.time() < end:
        time.sleep(0.1)
        st = h.status()
    n = st["devices"] if st else -1
    check(n >= 0, "%s: the plugin sent its device list (%d OpenCL devices)" % (tag, n))
    park(env, geo)

    # idle: nothing recorded; the lane says so
    path, lay = shot(env, geo, h, "idle-%s.png" % tag, "%s idle" % tag)
    lane_check(env, geo, h, path, lay, "%s idle" % tag, want_wave=False)
    check("Ready" in lay.text_of("status") and "Auto" in lay.text_of("in-use"),
          "%s idle: Ready, and what Auto will use ('%s')" % (tag, lay.text_of("in-use")))

    # the device list: distinct entries, the chosen one ticked; a choice writes the port
    click(env, geo, h, "device")
    time.sleep(0.3)
    path, lay = shot(env, geo, h, "device-list-%s.png" % tag, "%s device list" % tag)
    entries = [t[3] for t in lay.texts if t[0] == "popup"]
    check(lay.popup is not None and int(lay.popup[4]) == 2 + n + (1 if n else 0),
          "%s: a click opens the device list (%s entries)" % (tag, lay.popup and lay.popup[4]))
    titles = [e for e in entries if e.startswith(("Auto", "CPU", "Device", "All"))]
    check(len(titles) == len(set(titles)) and (n < 2 or "Device 2: " in " ".join(titles)),
          "%s: each device's entry is distinct: %s" % (tag, titles))
    px, py, pw, ph, pn, eh = lay.popup if lay.popup else (0, 0, 0, 0, 0, 0)
    click_at(env, geo, px + pw / 2, py + 4 * s + 1.5 * eh)  # the second entry: CPU
    check(wait_write(h, PORT_DEVICE) == 1.0, "%s: choosing CPU in the list writes the port" % tag)
    check(h.layout().popup is None, "%s: the list closes after a choice" % tag)
    click(env, geo, h, "device", button=3)
    check(wait_write(h, PORT_DEVICE) == 0.0, "%s: a right-click steps back to Auto" % tag)
    click(env, geo, h, "device", button=5)
    check(wait_write(h, PORT_DEVICE) == 1.0, "%s: the wheel steps on to CPU" % tag)
    park(env, geo)

    # recording: the lane grows live, the status counts
    state = {}

    def during():
        time.sleep(1.4)
        state["lay"] = h.layout()
        state["path"] = screenshot(env, geo, "recording-%s.png" % tag)

    take_at = 2 * 48000
    jobs0 = h.status()["jobs"]
    record(h, 2.5, take_at, during)
    lay = state["lay"]
    check_texts(lay, "%s recording" % tag)
    lane_check(env, geo, h, state["path"], lay, "%s recording" % tag)
    check("Recording" in lay.text_of("status") and "Recording" in lay.text_of("lane-caption"),
          "%s recording: status '%s', caption '%s'" % (tag, lay.text_of("status"),
                                                        lay.text_of("lane-caption")))
    # separating (the job is slowed: SB_FAULT_INJECT job:slow)
    st = wait_state(h, [STATE_SEPARATING, STATE_DONE], 60, poll=0.02)
    path, lay = shot(env, geo, h, "separating-%s.png" % tag, "%s separating" % tag)
    check(st and st["state"] == STATE_SEPARATING and re.search(r"Separating take \d+: \d+ %",
                                                                lay.text_of("status")),
          "%s: separating says its take and progress ('%s')" % (tag, lay.text_of("status")))
    st = wait_state(h, [STATE_DONE, STATE_ERROR], 120, jobs=jobs0 + 1)
    check(st and st["state"] == STATE_DONE, "%s: the take was separated (%s)" % (tag, st))
    time.sleep(0.6)
    path, lay = shot(env, geo, h, "done-%s.png" % tag, "%s done" % tag)
    lane_check(env, geo, h, path, lay, "%s done" % tag)
    rows = [k for k in lay.widgets if k.startswith("solo:")]
    check(len(rows) == 4 and "Stems of take" in lay.text_of("stems-heading") and
          "dB" in lay.text_of("levels:vocals"),
          "%s done: a row per stem with its levels (%s; '%s')" % (tag, rows,
                                                                 lay.text_of("levels:vocals")))
    take = re.search(r"take (\d+)", lay.text_of("stems-heading"))
    take = int(take.group(1)) if take else 0
    # each row's waveform is drawn in its stem's colour
    (x, y, wd, ht), _ = lay.widgets["wave:other"]
    check(ink_fraction(path, (x + 2 * s, y + 2 * s, wd - 4 * s, ht - 4 * s), PANEL) > 0.05,
          "%s done: the other stem's row shows its waveform" % tag)

    # audition: S sets the control the plugin reads, the plugin plays the stem; one at a time
    click(env, geo, h, "solo:vocals")
    check(wait_write(h, PORT_AUDITION) == 1.0, "%s: S of vocals sets Audition to 1" % tag)
    h.ask("roll 1 %d" % take_at, r"ROLLING")  # from the take's start: inside its region
    time.sleep(1.3)
    heard = int(h.ask("heard", r"HEARD (\d+)").group(1))
    check(heard > 0, "%s: the plugin played the vocals stem in place of the input (%d samples)" %
          (tag, heard))
    park(env, geo)
    path, lay = shot(env, geo, h, "auditioning-%s.png" % tag, "%s auditioning" % tag)
    check(lay.widgets["solo:vocals"][1] and "vocals alone" in lay.text_of("badge"),
          "%s auditioning: S lit, badge '%s'" % (tag, lay.text_of("badge")))
    click(env, geo, h, "mute:drums")
    check(wait_write(h, PORT_AUDITION) == 6.0, "%s: M of drums: the mix without drums (6)" % tag)
    lay = h.layout()
    check(not lay.widgets["solo:vocals"][1] and lay.widgets["mute:drums"][1],
          "%s: one audition at a time" % tag)
    click(env, geo, h, "mute:drums")
    check(wait_write(h, PORT_AUDITION) == 0.0, "%s: a second click turns it off" % tag)
    h.ask("roll 1 %d" % take_at, r"ROLLING")
    time.sleep(1.3)
    check(int(h.ask("heard", r"HEARD (\d+)").group(1)) == 0,
          "%s: audition off, the input passes unchanged" % tag)

    # a tooltip waits half a second and stays inside the window
    (x, y, wd, ht), _ = lay.widgets["record"]
    point(env, geo, x + wd - 3, y + ht / 2)
    time.sleep(0.2)
    early = h.layout().tip
    time.sleep(0.7)
    path, lay = shot(env, geo, h, "tooltip-%s.png" % tag, "%s tooltip" % tag)
    tip = lay.tip
    check(early is None and tip is not None, "%s: the tooltip waits (at 0.2 s: %s, at 0.9 s: %s)" %
          (tag, early, tip))
    if tip:
        check(tip[0] >= 0 and tip[1] >= 0 and tip[0] + tip[2] <= lay.window[0] and
              tip[1] + tip[3] <= lay.window[1], "%s: the tooltip is inside the window %s" %
              (tag, tip))
    # at the right edge too
    (x, y, wd, ht), _ = lay.widgets["mute:vocals"]
    point(env, geo, x + wd / 2, y + ht / 2)
    time.sleep(0.9)
    lay = h.layout()
    tip = lay.tip
    check(tip is not None and tip[0] + tip[2] <= lay.window[0] and tip[1] + tip[3] <= lay.window[1],
          "%s: the tooltip at the window's edge stays inside %s" % (tag, tip))
    park(env, geo)

    # the keyboard: a visible focus, Tab, keys for record and audition
    (x, y, wd, ht), _ = lay.widgets["title"]
    click_at(env, geo, x + wd / 2, y + ht / 2)
    time.sleep(0.2)
    key(env, "Tab", "Tab")
    time.sleep(0.3)
    path, lay = shot(env, geo, h, "keyboard-%s.png" % tag, "%s keyboard" % tag)
    check(lay.focus == "record" and lay.focus_visible,
          "%s: Tab, Tab: the focus is on Record, drawn (%s)" % (tag, lay.focus))
    key(env, "space")
    check(wait_write(h, PORT_RECORD) == 1.0, "%s: space on Record arms it" % tag)
    key(env, "r")
    check(wait_write(h, PORT_RECORD) == 0.0, "%s: R disarms" % tag)
    key(env, "2")
    check(wait_write(h, PORT_AUDITION) == 2.0, "%s: key 2 plays drums alone" % tag)
    key(env, "Escape")
    check(wait_write(h, PORT_AUDITION) == 0.0, "%s: Escape stops it" % tag)
    key(env, "shift+3")
    check(wait_write(h, PORT_AUDITION) == 7.0, "%s: Shift+3 plays the mix without bass" % tag)
    key(env, "0")
    check(wait_write(h, PORT_AUDITION) == 0.0, "%s: 0 stops it" % tag)
    key(env, "Escape")  # nothing playing: the focus ring goes
    time.sleep(0.2)
    check(not h.layout().focus_visible, "%s: Escape hides the focus" % tag)

    # a silent take: said while recording, and in full after
    h.ask("input silent", r"INPUT")
    state = {}

    def during_silent():
        time.sleep(1.8)
        state["lay"] = h.layout()

    record(h, 2.2, 20 * 48000, during_silent)
    check("Nothing heard yet" in state["lay"].text_of("detail"),
          "%s: a take that hears nothing says so while it records ('%s')" %
          (tag, state["lay"].text_of("detail")[:60]))
    st = wait_state(h, [STATE_SILENT], 30)
    park(env, geo)
    path, lay = shot(env, geo, h, "silent-%s.png" % tag, "%s silent take" % tag)
    detail = lay.text_of("detail")
    check(st and st["state"] == STATE_SILENT and "Silent take" in lay.text_of("status") and
          detail.rstrip().endswith("handled by: Ardour"),
          "%s: the silent take's advice is whole: '...%s'" % (tag, detail[-50:]))
    check("Previous: take %d" % take in lay.text_of("stems-heading"),
          "%s: the stems on show are the previous take's ('%s')" %
          (tag, lay.text_of("stems-heading")))
    h.ask("input tone", r"INPUT")

    # a missing model: a notice beside the Model control with its Install button, no Error
    h.ask("set %d 1" % PORT_MODEL, r"SET")  # HTDemucs, not installed here
    time.sleep(3.0)  # the plugin looks at the Model control every tick, its list every 2 s
    path, lay = shot(env, geo, h, "missing-model-%s.png" % tag, "%s missing model" % tag)
    st = h.status()
    check("install" in lay.widgets and "not installed" in lay.text_of("notice") and
          st["state"] != STATE_ERROR and "failed" not in lay.text_of("status"),
          "%s: a missing model is a notice with Install, not an Error (state %s, notice '%s')" %
          (tag, st["state"], lay.text_of("notice")[:50]))
    # a take with it fails, saying so in full
    jobs0 = h.status()["jobs"]
    record(h, 1.0, 30 * 48000)
    st = wait_state(h, [STATE_ERROR], 30)
    time.sleep(0.3)
    path, lay = shot(env, geo, h, "error-%s.png" % tag, "%s failed take" % tag)
    check(st and st["state"] == STATE_ERROR and "failed" in lay.text_of("status") and
          "not installed" in lay.text_of("detail"),
          "%s: the failed take says why ('%s')" % (tag, lay.text_of("detail")[:60]))
    # the next take: the error is gone as soon as it records
    h.ask("set %d 4" % PORT_MODEL, r"SET")
    time.sleep(0.5)
    state = {}

    def during_next():
        time.sleep(0.8)
        state["lay"] = h.layout()

    record(h, 1.5, 40 * 48000, during_next)
    stale = [t for t in state["lay"].texts if "not installed" in t[3] or "failed" in t[3]]
    check(not stale, "%s: no stale error while the next take records (%s)" %
          (tag, [t[3][:40] for t in stale]))
    st = wait_state(h, [STATE_DONE], 120, jobs=jobs0 + 1)
    lay = h.layout()
    stale = [t for t in lay.texts if "not installed" in t[3] or "failed" in t[3]]
    check(st and st["state"] == STATE_DONE and not stale,
          "%s: nor once it is done (%s)" % (tag, [t[3][:40] for t in stale]))

    # a fallback: Device 8 is missing here; the window says it in the button's numbering
    h.ask("set %d 9" % PORT_DEVICE, r"SET")
    jobs0 = h.status()["jobs"]
    record(h, 1.0, 50 * 48000)
    st = wait_state(h, [STATE_DONE, STATE_ERROR], 120, jobs=jobs0 + 1)
    time.sleep(0.5)
    park(env, geo)
    path, lay = shot(env, geo, h, "fallback-%s.png" % tag, "%s fallback" % tag)
    in_use = lay.text_of("in-use")
    check(st and st["fallback"] == 1 and "Device 8 is not on this machine" in in_use and
          "device:7" not in lay.all_text(),
          "%s: the fallback in the user's words ('%s')" % (tag, in_use[:90]))
    click(env, geo, h, "device")
    time.sleep(0.3)
    lay = h.layout()
    check("Device 8 (not present)" in lay.all_text(),
          "%s: the list keeps the missing choice, marked" % tag)
    key(env, "Escape")
    h.ask("set %d 1" % PORT_DEVICE, r"SET")
    park(env, geo)


def run_scale_1(env, fake_open_log):
    h = Host(env, 1.0)
    try:
        if not check(h.expect("READY", 30) is not None, "the host embedded the UI"):
            return
        geo = h.geometry()
        check(geo[2:] == (BASE_W, BASE_H), "UI size %dx%d at scale 1" % geo[2:])
        lay = h.layout()
        check(lay.window and lay.window[2] == 1.0 and lay.window[3] == "host",
              "the scale is the host's (%s)" % (lay.window,))

        # the Precision and Keep take buttons write their controls (saved by the host)
        click(env, geo, h, "precision")
        check(wait_write(h, PORT_PRECISION) == 1.0, "a click on FP32 asks for bf16 products")
        click(env, geo, h, "precision")
        check(wait_write(h, PORT_PRECISION) == 0.0, "a second click goes back to fp32")
        click(env, geo, h, "keep")
        check(wait_write(h, PORT_KEEP_TAKE) == 1.0, "a click on Keep take keeps take recordings")
        click(env, geo, h, "keep")
        check(wait_write(h, PORT_KEEP_TAKE) == 0.0, "a second click removes them after the commit")
        # the host moves the port (automation, generic UI, preset): the window follows it
        h.ask("set %d 1" % PORT_DEVICE, r"SET")
        time.sleep(0.3)
        check(h.layout().text_of("device") == "CPU", "the window shows the host's choice")
        nt = saved_state(h, "state-cpu")
        key_m = re.search(r'<https://stembridge.org/lv2/stembridge#deviceKey> "([^"]*)"', nt)
        check(port_in_state(nt, "device") == 1.0 and key_m and key_m.group(1) == "cpu",
              "the saved state holds CPU and its stable key")
        h.ask("set %d 0" % PORT_DEVICE, r"SET")

        tour(env, h, geo, 1.0, "1x")

        # where the stems are: the file manager opens the folder; the path is copied
        folder = h.layout().text_of("folder")
        click(env, geo, h, "open-folder")
        time.sleep(0.8)
        opened = open(fake_open_log).read().strip() if os.path.exists(fake_open_log) else ""
        check(folder and opened == folder, "Open folder runs xdg-open on '%s' (%s)" % (folder, opened))
        click(env, geo, h, "copy-path")
        time.sleep(0.3)
        m = h.ask("clipboard", r"CLIPBOARD(?:_NONE)? ?(.*)")
        check(m and m.group(1) == folder, "Copy path puts '%s' on the clipboard (%s)" %
              (folder, m and m.group(1)))
        check("Copied" in h.layout().text_of("copy-path"), "the button says it copied")

        # reflow: narrow, and wide but low
        for w, hgt, name in ((380, 640, "narrow"), (760, 460, "resized")):
            check(h.ask("resize %d %d" % (w, hgt), r"RESIZED") is not None, "resized to %dx%d" % (w, hgt))
            time.sleep(0.6)
            geo = h.geometry()
            path, lay = shot(env, geo, h, "%s-1x.png" % name, "%dx%d" % (w, hgt))
            check(lay.window[:2] == (w, hgt), "the window follows the host to %dx%d" % (w, hgt))
        # buttons grow with the window: the device button spans the width
        (x, y, wd, ht), _ = h.layout().widgets["device"]
        check(x + wd > 700, "the device button reaches x=%d of 760" % (x + wd))

        # the window's own zoom, saved with the session
        click(env, geo, h, "zoom")  # auto -> 100 %
        click(env, geo, h, "zoom")  # 100 -> 125 %
        time.sleep(0.8)
        m = h.ask("uiwindow", r"UIWINDOW (\S+) (\S+) (\S+) (\S+)")
        size = (int(m.group(3)), int(m.group(4))) if m else None
        check(size == (950, 575), "zoom 125 %% resizes the window to 950x575 (%s)" % (size,))
        lay = h.layout()
        check(lay.window[2] == 1.25 and lay.window[3] == "zoom" and
              "125 %" in lay.text_of("zoom"), "the window draws at 125 %% (%s)" % (lay.window,))
        geo = h.geometry()
        shot(env, geo, h, "zoom125-1x.png", "zoom 125 %")
        nt = saved_state(h, "state-zoom")
        check('<https://stembridge.org/lv2/stembridge#uiScale> "1.25"' in nt,
              "the zoom is saved with the session")
        key(env, "ctrl+0")
        time.sleep(0.6)
        lay = h.layout()
        check(lay.window[2] == 1.0 and lay.window[3] == "host", "Ctrl+0 goes back to the host's scale")
    finally:
        check(h.close() == 0, "the host closed the UI and the plugin cleanly")


def run_scale_2(env):
    h = Host(env, 2.0)
    try:
        if not check(h.expect("READY", 30) is not None, "the host embedded the UI at scale 2"):
            return
        geo = h.geometry()
        check(geo[2:] == (2 * BASE_W, 2 * BASE_H), "UI size %dx%d at ui:scaleFactor 2" % geo[2:])
        tour(env, h, geo, 2.0, "2x")
    finally:
        check(h.close() == 0, "the host closed cleanly at scale 2")


def run_xft_dpi(env):
    """A host that sends no scale factor on a desktop set to 2x (Xft.dpi 192, as GNOME's and
    KDE's settings set it for GDK_SCALE=2): Xft.dpi decides."""
    h = Host(env, "none 192")
    try:
        if not check(h.expect("READY", 30) is not None, "the host without a scale factor"):
            return
        geo = h.geometry()
        lay = h.layout()
        check(geo[2:] == (2 * BASE_W, 2 * BASE_H) and lay.window[3] == "Xft.dpi",
              "without the host's scale factor, Xft.dpi 192 gives %dx%d (%s)" % (geo[2], geo[3],
                                                                               lay.window))
        shot(env, geo, h, "xft-dpi-192.png", "Xft.dpi 192")
    finally:
        check(h.close() == 0, "the host closed cleanly")


xvfb, display = start_xvfb(OUT)
# a file manager that notes what it was asked to open
bin_dir = os.path.join(OUT, "bin")
os.makedirs(bin_dir)
fake_open_log = os.path.join(OUT, "xdg-open.log")
with open(os.path.join(bin_dir, "xdg-open"), "w") as f:
    f.write('#!/bin/sh\nprintf "%%s\\n" "$1" > "%s"\n' % fake_open_log)
os.chmod(os.path.join(bin_dir, "xdg-open"), stat.S_IRWXU)
env = dict(os.environ, DISPLAY=display, PATH=bin_dir + ":" + os.environ.get("PATH", ""),
           SB_FAULT_INJECT="job:slow:1200")
try:
    t0 = time.time()
    run_scale_1(env, fake_open_log)
    run_scale_2(env)
    run_xft_dpi(env)
    print("%.1f s" % (time.time() - t0))
finally:
    xvfb.terminate()
    xvfb.wait()
print("%d failed" % len(fails))
sys.exit(1 if fails else 0)
