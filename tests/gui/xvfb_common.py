"""What the window tests share: a private Xvfb, and the window's own description of what it drew
where (gui/ui_x11.c: the _STEMBRIDGE_LAYOUT property)."""
import os
import subprocess
import sys
import time

fails = []  # what failed, in order
T0 = time.time()


def check(cond, what):
    """One check, printed as it passes or fails (with the seconds since the start)."""
    print(("PASS " if cond else "FAIL ") + what + " [%.1f s]" % (time.time() - T0), flush=True)
    if not cond:
        fails.append(what)
    return cond


def ink_fraction(path, rect, ground):
    """The share of a rectangle's pixels in a screenshot that differ from its ground colour."""
    x, y, w, h = (int(round(v)) for v in rect)
    out = subprocess.run(["convert", path, "-crop", "%dx%d+%d+%d" % (w, h, x, y), "+repage",
                          "-fuzz", "6%", "-fill", "black", "-opaque", ground, "-fill", "white",
                          "+opaque", "black", "-format", "%[fx:mean]", "info:"],
                         capture_output=True, text=True)
    try:
        return float(out.stdout.strip())
    except ValueError:
        return -1.0


def answers(display):
    return subprocess.run(["xdotool", "getdisplaygeometry"], env=dict(os.environ, DISPLAY=display),
                          capture_output=True).returncode == 0


def start_xvfb(out):
    """A private Xvfb on a free display, used only once it answers. The display number is
    chosen here: Xvfb's -displayfd sometimes fails under meson ("Cannot write display number to
    fd"), and a server that reports its number may not yet accept connections."""
    xlog = open(os.path.join(out, "xvfb.log"), "w")
    start = 50 + os.getpid() % 400
    for n in range(start, start + 40):
        if os.path.exists("/tmp/.X%d-lock" % n) or os.path.exists("/tmp/.X11-unix/X%d" % n):
            continue
        display = ":%d" % n
        xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", "1600x1300x24", "-nolisten",
                                 "tcp"], stderr=xlog)
        end = time.time() + 15
        while xvfb.poll() is None and time.time() < end:
            if answers(display):
                return xvfb, display
            time.sleep(0.1)
        print("Xvfb on %s did not answer (exit %s); trying another; its log: %s" %
              (display, xvfb.poll(), xlog.name), flush=True)
        xvfb.kill()
        xvfb.wait()
    sys.exit("Xvfb did not start")


class Layout:
    """The window's own description of what it drew where, in window pixels."""

    def __init__(self, text):
        self.widgets, self.texts, self.focus, self.popup, self.tip = {}, [], None, None, None
        self.window = None
        for line in text.splitlines():
            f = line.split(" ")
            if f[0] == "window":
                self.window = (int(f[1]), int(f[2]), float(f[4]), f[6])
            elif f[0] == "focus":
                self.focus = f[1] if f[1] != "none" else None
                self.focus_visible = f[2] == "1"
            elif f[0] == "popup":
                self.popup = tuple(float(v) for v in f[1:7])
            elif f[0] == "tip":
                self.tip = tuple(float(v) for v in f[1:5])
            elif f[0] == "w":
                self.widgets[f[1]] = (tuple(float(v) for v in f[2:6]), f[6] == "1")
            elif f[0] == "t":
                self.texts.append((f[1], tuple(float(v) for v in f[2:6]),
                                   tuple(float(v) for v in f[6:10]), " ".join(f[10:])))

    def text_of(self, name):
        return " ".join(t[3] for t in self.texts if t[0] == name)

    def all_text(self):
        return " ".join(t[3] for t in self.texts)
