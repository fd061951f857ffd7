"""Signals as one exception: SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt (so a run's
cleanup, `except KeyboardInterrupt`, runs for each), remembering which signal came, so the CLI
exits 128 + its number with one line. `deferred()` holds a signal back while a file must be
written whole (a run's final status, the samples' conversion), then raises it."""

from __future__ import annotations

import signal
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_state = {"received": None, "deferring": 0, "pending": None}


def handler(signum, frame):
    """The signal handler: KeyboardInterrupt now, or when the deferred() block ends."""
    _state["received"] = signum
    if _state["deferring"]:
        _state["pending"] = signum
        return
    raise KeyboardInterrupt(signal.Signals(signum).name)


def install() -> None:
    """Route SIGINT, SIGTERM and SIGHUP through handler (main thread only); nothing received yet."""
    _state.update(received=None, deferring=0, pending=None)
    for s in SIGNALS:
        signal.signal(s, handler)


def settle() -> None:
    """The command's outcome is decided and said (its exit code set, its last line printed): a
    signal from here on changes nothing. Without this, one arriving while the interpreter shuts down
    (Python restores the default handlers then) kills the process silently after an "OK" line."""
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def received() -> int:
    """The signal that interrupted this process (SIGINT when none was seen: an interrupt raised
    some other way)."""
    return _state["received"] or signal.SIGINT


@contextmanager
def deferred():
    """While the block runs, a signal is only recorded; it is raised as KeyboardInterrupt when
    the block ends (not inside it), so what the block writes is written whole."""
    _state["deferring"] += 1
    try:
        yield
    finally:
        _state["deferring"] -= 1
        if not _state["deferring"] and _state["pending"] is not None:
            signum, _state["pending"] = _state["pending"], None
            raise KeyboardInterrupt(signal.Signals(signum).name)
