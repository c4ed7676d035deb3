"""The experiments' helpers under their old name: everything here is rkv.core
(experiments/rkv/). Drivers written against `import common` keep working;
new drivers import rkv (see experiments/rkv/__init__.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rkv import core as _core  # noqa: E402


def __getattr__(name):
    """common.NAME for every public name of rkv.core, looked up there when a
    driver asks (PEP 562) rather than copied in by a star import, which would
    hide undefined names in this file from pyflakes (tests/arch/pyflakes.py);
    names this file defines come first."""
    if not name.startswith("_") and hasattr(_core, name):
        return getattr(_core, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---- what experiments/run_all and experiments/reproduce share ----------------
import argparse  # noqa: E402
import json  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line naming the argument ("PROG: error:
    --jobs: ..."), exit 2, without the usage block above it."""

    def error(self, message):
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def positive_int(text):
    """--jobs N: an integer >= 1 (0 and negative counts were once accepted)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want an integer >= 1, got {text!r}")
    if n < 1:
        raise argparse.ArgumentTypeError(f"want an integer >= 1, got {text!r}")
    return n


def name_list(ap, opt, text, known):
    """--only A,B: the names, each known, none twice; an empty list (--only ""
    or --only ",") is refused rather than read as "all" or "none"."""
    names = [n.strip() for n in text.split(",")]
    if not text.strip() or any(not n for n in names):
        ap.error(f"{opt}: want a comma-separated list of names without empty items, got {text!r}"
                 f" (known: {', '.join(known)})")
    unknown = [n for n in names if n not in known]
    if unknown:
        ap.error(f"{opt}: unknown name(s) {', '.join(unknown)} (known: {', '.join(known)})")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        ap.error(f"{opt}: {', '.join(twice)} given twice")
    return names


def writable_folder(ap, opt, path):
    """A folder to write into: made if missing; refused (one line) when it is
    a file, or it or its nearest existing parent cannot be written."""
    if os.path.exists(path) and not os.path.isdir(path):
        ap.error(f"{opt}: {path} exists and is not a folder")
    probe = path
    while not os.path.exists(probe):
        probe = os.path.dirname(probe) or "."
    if not os.path.isdir(probe):
        ap.error(f"{opt}: {path}: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        ap.error(f"{opt}: {path}: {probe} is not writable")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        ap.error(f"{opt}: {path}: {e.strerror}")


def read_json_object(ap, what, path, need):
    """A JSON file that must hold an object with the fields in need (name ->
    type); anything else is one line naming the file and what is wrong."""
    try:
        with open(path) as f:
            v = json.load(f)
    except OSError as e:
        ap.error(f"{what} {path}: {e.strerror}")
    except ValueError as e:
        ap.error(f"{what} {path}: not JSON ({e})")
    if not isinstance(v, dict):
        ap.error(f"{what} {path}: want a JSON object, got {type(v).__name__}")
    for k, t in need.items():
        if k not in v:
            ap.error(f"{what} {path}: missing field {k!r}")
        if not isinstance(v[k], t):
            ap.error(f"{what} {path}: field {k!r}: want {t.__name__}, got {type(v[k]).__name__}")
    return v


class Children:
    """Child processes that a SIGINT or SIGTERM reaches. Each child starts in
    a process group of its own (so a driver and the radixkv it runs are
    signalled together, and none is left orphaned when the parent is killed
    by `kill`, not by the terminal); each signal run_all gets is forwarded to
    the running child's group once (radixkv writes its summary on the first,
    and a third would make it exit at once: interrupt.h) and the first is
    remembered (self.signal); the caller waits for the child and stops
    starting new ones."""

    def __init__(self):
        self.signal = 0
        self.current = None
        self.sent = set()  # the groups that got the remembered signal
        for s in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(s) is not signal.SIG_IGN:
                signal.signal(s, self._on_signal)

    def _on_signal(self, sig, frame):
        if not self.signal:
            self.signal = sig
        p = self.current
        if p is not None:
            self._send(p.pid, sig)

    def _send(self, pgid, sig):
        self.sent.add(pgid)
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass

    def popen(self, cmd, **kw):
        p = subprocess.Popen(cmd, start_new_session=True, **kw)
        self.current = p
        if self.signal:  # a signal came while it was starting
            self._send(p.pid, self.signal)
        return p

    def wait(self, p):
        """Waits for p, then for the rest of its group (what it started and
        left behind: after a signal, a radixkv still writing its summary),
        which gets the signal if it has not yet, and SIGKILL after 30 s."""
        rc = p.wait()
        deadline = time.monotonic() + 30
        while True:
            try:
                os.killpg(p.pid, 0)
            except OSError:
                break
            if time.monotonic() > deadline:
                self._send(p.pid, signal.SIGKILL)
                break
            if self.signal and p.pid not in self.sent:
                self._send(p.pid, self.signal)
            time.sleep(0.1)
        self.current = None
        return rc

    def run(self, cmd, **kw):
        return self.wait(self.popen(cmd, **kw))

    def exit_status(self):
        return 128 + self.signal if self.signal else 0


def write_json_atomic(path, value):
    """path holds value as JSON, written under a temporary name beside it and
    renamed, so a reader never sees half a file."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
