"""The real CLI entry point (commbench.cli.main) run inside the test process: the same code as
`python -m commbench`, without a Python start per call, for property-based tests that try
hundreds of inputs. Signal handlers are put back afterwards."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
from dataclasses import dataclass

from commbench.cli import main
from commbench.errors import BAD_INPUT, OK

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str

    def assert_clean(self, codes=(OK, BAD_INPUT)) -> None:
        """The trust-boundary contract: an accepted exit code; on failure exactly one line on
        stderr and no traceback anywhere."""
        assert self.code in codes, f"exit {self.code}; stderr: {self.stderr[-2000:]!r}"
        assert "Traceback" not in self.stderr + self.stdout, self.stderr[-2000:]
        if self.code != OK:
            lines = [line for line in self.stderr.splitlines() if line.strip()]
            assert len(lines) == 1, f"{len(lines)} lines on stderr: {self.stderr[-2000:]!r}"
            assert "\x1b" not in lines[0], lines[0]


def run_cli(*args, cwd=None) -> Outcome:
    """`commbench ARGS` in this process: exit code, stdout and stderr."""
    saved = {s: signal.getsignal(s) for s in _SIGNALS}
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    argv = sys.argv
    try:
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = ["commbench", *map(str, args)]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = argv
        os.chdir(here)
        for s, handler in saved.items():
            signal.signal(s, handler)
    return Outcome(code, out.getvalue(), err.getvalue())
