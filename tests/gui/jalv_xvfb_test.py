#!/usr/bin/env python3
"""The plugin's window in a real host: jalv.gtk3 (suil wraps our X11 window into GTK 3, as it
does in every GTK host) on a JACK server of its own (the dummy driver, no sound card), under
Xvfb, used as a person would. A metronome plays into the plugin; the test clicks Record in the
window, rolls JACK's transport for a few seconds, and waits for the stems; then solos a stem. It
checks what a person sees at each step (the window's own description of what it drew where, and
screenshots in OUT_DIR): the window whole at its size, Record armed through the host, the take's
waveform in the lane, a row per stem, the audition badge after a click on S, the stems on disk.

Usage: jalv_xvfb_test.py BUNDLE_URI OUT_DIR   (LV2_PATH must point at the build's lv2 folder)
Exit 0 pass, 1 fail, 77 skipped (jalv.gtk3, jackd, JACK's example clients, Xvfb, xdotool, xprop
or ImageMagick missing). A JACK server that does not start is a failure, not a skip.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

from xvfb_common import Layout, check, fails, ink_fraction, start_xvfb

URI, OUT = sys.argv[1], os.path.abspath(sys.argv[2])
PANEL = "#24282e"   # the lane's ground (gui/ui_draw.c)
TOOLS = ["jalv.gtk3", "jackd", "jack_metro", "jack_connect", "jack_lsp", "jack_transport",
         "jack_wait", "Xvfb", "xdotool", "xprop", "xwininfo", "import", "convert"]
missing = [t for t in TOOLS if not shutil.which(t)]
if missing:
    print("skipped: missing " + ", ".join(missing) + " (Debian: jalv, jackd2, x11-utils, xvfb, "
          "xdotool, imagemagick)")
    sys.exit(77)
shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)
home = tempfile.mkdtemp(prefix="sb-jalv-")
# JACK keeps a registry of its servers in /dev/shm after the last one stops: removed at the end
# when this test made it and no other JACK server runs
REGISTRY = "/dev/shm/jack-shm-registry"
registry_was_there = os.path.exists(REGISTRY)
server = "sbtest%d" % os.getpid()
xvfb, display = start_xvfb(OUT)
env = dict(os.environ, DISPLAY=display, HOME=home, JACK_DEFAULT_SERVER=server,
           XDG_CONFIG_HOME=home + "/config", XDG_DATA_HOME=home + "/data",
           XDG_CACHE_HOME=home + "/cache", JACK_NO_AUDIO_RESERVATION="1", NO_AT_BRIDGE="1")
procs = []


def start(args, log):
    p = subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=open(log, "w"),
                         stderr=subprocess.STDOUT)
    procs.append(p)
    return p


def finish(code):
    for p in reversed(procs):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    xvfb.terminate()
    xvfb.wait()
    shutil.rmtree(home, ignore_errors=True)
    others = subprocess.run(["pgrep", "-x", "jackd|jackdbus"], capture_output=True).stdout
    if not registry_was_there and not others and os.path.exists(REGISTRY):
        os.remove(REGISTRY)
    print("%d failure(s)" % len(fails) if fails else "all passed")
    sys.exit(code if code else (1 if fails else 0))


jack = start(["jackd", "-n", server, "--no-realtime", "-d", "dummy", "-r", "48000", "-p", "1024"],
             os.path.join(OUT, "jackd.log"))
up = subprocess.run(["jack_wait", "-w", "-t", "15"], env=env, capture_output=True, text=True)
if not check(up.returncode == 0 and jack.poll() is None,
             "a JACK server of its own starts (dummy driver): " + up.stdout.strip()):
    print(open(os.path.join(OUT, "jackd.log")).read())
    finish(1)
start(["jack_metro", "-n", "metro", "-b", "240", "-f", "440", "-D", "100"],
      os.path.join(OUT, "metro.log"))
jalv = start(["jalv.gtk3", "-x", "-n", "sb", "-s", URI], os.path.join(OUT, "jalv.log"))


def ui_window():
    """Our window inside jalv's: the one that carries _STEMBRIDGE_LAYOUT."""
    ids = subprocess.run(["xdotool", "search", "--name", ""], env=env, capture_output=True,
                         text=True).stdout.split()
    for w in ids:
        if b"window " in subprocess.run(["xprop", "-id", w, "_STEMBRIDGE_LAYOUT"], env=env,
                                        capture_output=True).stdout:
            return w
    return None


def layout(win):
    out = subprocess.run(["xprop", "-id", win, "_STEMBRIDGE_LAYOUT"], env=env,
                         capture_output=True, text=True).stdout
    if '= "' not in out:
        return Layout("")
    text = out.split('= "', 1)[1].rsplit('"', 1)[0]
    return Layout(text.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\"))


def origin(win):
    """The window's place on the screen and its size: x, y, width, height."""
    info = subprocess.run(["xwininfo", "-id", win], env=env, capture_output=True,
                          text=True).stdout
    get = {}
    for line in info.splitlines():
        key, _, value = line.strip().partition(":")
        get[key] = value.strip()
    return tuple(int(get[k]) for k in ("Absolute upper-left X", "Absolute upper-left Y", "Width",
                                       "Height"))


def click(win, name):
    lay = layout(win)
    w = lay.widgets.get(name)
    if not check(w is not None, "the window shows '%s'" % name):
        return False
    (x, y, wd, ht), _ = w
    ox, oy, _, _ = origin(win)
    subprocess.run(["xdotool", "mousemove", str(int(ox + x + wd / 2)), str(int(oy + y + ht / 2))],
                   env=env, check=True)
    time.sleep(0.3)
    subprocess.run(["xdotool", "click", "1"], env=env, check=True)
    return True


def shot(win, name):
    ox, oy, w, h = origin(win)
    path = os.path.join(OUT, name)
    subprocess.run(["import", "-window", "root", "-crop", "%dx%d+%d+%d" % (w, h, ox, oy),
                    "+repage", path], env=env, check=True)
    print("screenshot", path, flush=True)
    return path


def wait_for(win, pred, timeout):
    end = time.time() + timeout
    lay = layout(win)
    while time.time() < end and not pred(lay):
        time.sleep(0.25)
        lay = layout(win)
    return lay


win = None
end = time.time() + 30
while win is None and time.time() < end and jalv.poll() is None:
    time.sleep(0.5)
    win = ui_window()
if not check(win is not None, "jalv.gtk3 shows the plugin's window"):
    print(open(os.path.join(OUT, "jalv.log")).read())
    finish(1)
ports = ""
end = time.time() + 10
while time.time() < end and not ("metro:240_bpm" in ports and "sb:in_r" in ports):
    time.sleep(0.2)
    ports = subprocess.run(["jack_lsp"], env=env, capture_output=True, text=True).stdout
linked = [subprocess.run(["jack_connect", "metro:240_bpm", "sb:" + p], env=env).returncode == 0
          for p in ("in_l", "in_r")]
check(all(linked), "the metronome plays into the plugin's inputs (JACK ports: %s)" %
      " ".join(ports.split()))

lay = wait_for(win, lambda lay: lay.window is not None, 10)
ox, oy, w, h = origin(win)
check(lay.window is not None and (w, h) == (lay.window[0], lay.window[1]) and w >= 600 and h >= 600,
      "the host gives the window the size it asks for: %dx%d (it drew %s)" %
      (w, h, lay.window[:2] if lay.window else None))
path = shot(win, "jalv-idle.png")
bad = [t for t in lay.texts if t[2][2] > 0 and t[2][0] + t[2][2] > t[1][0] + t[1][2] + 1]
check(len(lay.texts) > 5 and not bad, "idle: %d texts drawn, none past its box" % len(lay.texts))

click(win, "record")
lay = wait_for(win, lambda lay: "○" not in lay.text_of("record"), 5)
check("○" not in lay.text_of("record"),
      "Record armed through the host: the button reads '%s'" % lay.text_of("record"))
shot(win, "jalv-armed.png")

transport = subprocess.Popen(["jack_transport"], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
transport.stdin.write("locate 0\nplay\n")
transport.stdin.flush()
time.sleep(5)
transport.stdin.write("stop\nquit\n")
transport.stdin.flush()
transport.wait(timeout=10)

lay = wait_for(win, lambda lay: "solo:vocals" in lay.widgets, 90)
path = shot(win, "jalv-done.png")
check("solo:vocals" in lay.widgets and "solo:other" in lay.widgets,
      "after a take of 5 s: a row per stem (%s); status '%s'" %
      (" ".join(n for n in lay.widgets if n.startswith("name:")), lay.text_of("status")))
lane = lay.widgets.get("lane")
if check(lane is not None, "the take lane is there"):
    (x, y, wd, ht), _ = lane
    s = lay.window[2]
    f = ink_fraction(path, (x + 6 * s, y + 6 * s, wd - 12 * s, ht - 12 * s), PANEL)
    check(f > 0.05, "the take lane shows the metronome's take (%.0f %% inked)" % (100 * f))
wavs = glob.glob(os.path.join(home, "**", "*.wav"), recursive=True)
check(any(os.path.basename(p).startswith("vocals") or "vocals" in p for p in wavs),
      "the stems are on disk: %d WAV files under the host's data folder" % len(wavs))

if "solo:drums" in lay.widgets:
    click(win, "solo:drums")
    lay = wait_for(win, lambda lay: lay.text_of("badge") != "", 5)
    shot(win, "jalv-audition.png")
    check("drums" in lay.text_of("badge").lower(),
          "S on drums: the badge says what plays: '%s'" % lay.text_of("badge"))
finish(0)
