"""Text from files and users made safe for a terminal or a CI log: control characters (ANSI/OSC
escape sequences, carriage returns, bidirectional overrides, invisible format characters) shown
as escapes, never sent raw."""

from __future__ import annotations

import unicodedata

_UNSAFE = ("Cc", "Cf", "Cs", "Zl", "Zp")  # controls, format characters, lone surrogates, line and paragraph separators


def _char(c: str) -> str:
    if c in "\n\t" or unicodedata.category(c) not in _UNSAFE:
        return c
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def printable(text) -> str:
    """text with every control or format character escaped (newlines and tabs kept)."""
    text = str(text)
    return text if text.isprintable() else "".join(map(_char, text))


def one_line(text) -> str:
    """printable(text) on one line: line breaks become ' / ' (an error message is one line)."""
    return " / ".join(part.strip() for part in printable(text).replace("\t", " ").splitlines() if part.strip())
