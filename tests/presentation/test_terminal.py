"""Text for terminals (commbench/presentation/terminal.py): printable() leaves no control or format character and
escapes them visibly, one_line() joins lines; an error message holding a string from a file reaches
the terminal escaped."""

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from cli_inprocess import run_cli
from commbench.errors import BAD_INPUT
from commbench.presentation.terminal import one_line, printable


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_printable_leaves_no_control_or_format_character(text):
    shown = printable(text)
    assert all(c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in shown)
    if text.isprintable():
        assert shown == text
    assert "\n" not in one_line(text)


def test_printable_escapes_terminal_sequences_visibly():
    assert printable("a\x1b[31mb\x1b]8;;http://x\x07\u202ec\r") == "a\\x1b[31mb\\x1b]8;;http://x\\x07\\u202ec\\x0d"
    assert one_line("first\n  second\n\n") == "first / second"


def test_an_error_message_from_a_file_reaches_the_terminal_escaped(tmp_path):
    outcome = run_cli("compare", str(tmp_path / "no\x1b[2Jsuch"), str(tmp_path))
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and "\\x1b[2Jsuch" in outcome.stderr
