"""Text from files and users made safe for a terminal or a CI log: control characters (ANSI/OSC
escape sequences, carriage returns, bidirectional overrides, invisible format characters) shown
as escapes, never sent raw; and what the terminal's encoding cannot take (a label "é" under
PYTHONIOENCODING=ascii or a C locale) shown as an escape (\xe9), never an error: standard output
and error are set to escape it when this module is imported (the CLI imports it first)."""

from __future__ import annotations

import codecs
import errno
import os
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
