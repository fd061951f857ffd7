"""Text from files and users made safe for a terminal or a CI log: control characters (ANSI/OSC
escape sequences, carriage returns, bidirectional overrides, invisible format characters) shown
as escapes, never sent raw; and what the terminal's encoding cannot take (a label "é" under
PYTHONIOENCODING=ascii or a C locale) shown as an escape (\xe9), never an error: standard output
and error are set to escape it when this module is imported (the CLI imports it first)."""

from __future__ import annotations

import codecs
import errno
import os
import stat
import sys
import unicodedata

from rich.console import Console as RichConsole

_UNSAFE = ("Cc", "Cf", "Cs", "Zl", "Zp")  # controls, format characters, lone surrogates, line and paragraph separators


def _escape(c: str) -> str:
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}"


def _char(c: str) -> str:
    return c if c in "\n\t" or unicodedata.category(c) not in _UNSAFE else _escape(c)


def printable(text) -> str:
    """text with every control or format character escaped (newlines and tabs kept)."""
    text = str(text)
    return text if text.isprintable() else "".join(map(_char, text))


def one_line(text) -> str:
    """printable(text) on one line: line breaks become ' / ' (an error message is one line)."""
    return " / ".join(part.strip() for part in printable(text).replace("\t", " ").splitlines() if part.strip())


def inline(text) -> str:
    """text on one line with only printable characters (for a table cell, a log line or XML):
    every other character escaped (line breaks, tabs, unassigned and private code points too)."""
    text = str(text)
    return text if text.isprintable() else "".join(c if c.isprintable() else _escape(c) for c in text)


def escape_unencodable(*streams) -> None:
    """Make text streams (default: sys.stdout and sys.stderr) whose encoding is not a Unicode one
    write what it cannot encode as backslash escapes instead of raising UnicodeEncodeError."""
    for stream in streams or (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or ""
        try:
            unicode = codecs.lookup(encoding).name.startswith("utf")
        except LookupError:
            unicode = False
        if not unicode and getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError, AttributeError):
                pass


escape_unencodable()


class Console(RichConsole):
    """rich's Console, except for a reader that went away (`| head`, `2>&1 | head`): rich answers
    that with exit 1 (a failure, to a CI script); here it is the BrokenPipeError that the CLI's
    entry point answers with its one line and exit 141 (commbench.cli.app), the stream left writing
    to /dev/null so that nothing later raises again."""

    def on_broken_pipe(self) -> None:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self.file.fileno())
            os.close(null)
        except (OSError, ValueError, AttributeError):
            pass
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


class StdoutUnwritable(BrokenPipeError):
    """Standard output refused a write (no room: /dev/full, a full file system): the command stops as for a
    closed pipe (the job ended, its rows kept), and says so (commbench.cli.app), never blaming the results
    folder."""


def stdout_full(exc: OSError) -> bool:
    """Whether a write error that names no file was standard output's: no room (ENOSPC, EDQUOT) where
    stdout is /dev/full (1, 7) or a file on a file system with no block left."""
    if isinstance(exc, StdoutUnwritable):
        return True
    if exc.filename is not None or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
        return False
    try:
        fd = sys.stdout.fileno()
        st = os.fstat(fd)
        if stat.S_ISCHR(st.st_mode):
            return (os.major(st.st_rdev), os.minor(st.st_rdev)) == (1, 7)
        return stat.S_ISREG(st.st_mode) and os.fstatvfs(fd).f_bavail == 0
    except (OSError, ValueError, AttributeError):  # no stdout to look at (closed, or replaced by a stream)
        return False


def shown(on_event):
    """on_event, with standard output's refusal to take what it shows raised as StdoutUnwritable (what
    the shown event holds is on disk already: a folder's writer records before it shows)."""
    def show(event):
        try:
            on_event(event)
        except OSError as exc:
            if not isinstance(exc, BrokenPipeError) and stdout_full(exc):
                raise StdoutUnwritable(exc.errno, exc.strerror) from None
            raise
    return show
