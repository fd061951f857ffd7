"""commbench.run.side_python.check_python: which Python may serve an ab side (its --python-a/-b),
on fake Pythons (shell scripts answering the probe) and the real one."""

import sys

import pytest

import commbench
from commbench import runinfo
from commbench.errors import InputError
from commbench.rank.turns import PROTOCOL
from commbench.run.side_python import check_python


def _python(tmp_path, body: str):
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_check_python_takes_a_python_with_commbench_of_this_protocol(tmp_path):
    # the third word is PYTHONSAFEPATH as the probe sees it: set for it, so the current folder is not on sys.path
    # the third line: the git revision of that side's commbench source ("-": not a checkout)
    py = _python(tmp_path, f'echo "{PROTOCOL} 9.9 $PYTHONSAFEPATH"\necho /venv/lib/commbench/__init__.py\necho abc123\n')
    assert check_python(py, "--python-b") == {"commbench": "9.9", "path": "/venv/lib/commbench/__init__.py",
                                              "git_revision": "abc123"}
    (tmp_path / "wheel").mkdir()
    wheel = _python(tmp_path / "wheel", f'echo "{PROTOCOL} 9.9 1"\necho /venv/lib/commbench/__init__.py\necho -\n')
    assert check_python(wheel, "--python-b")["git_revision"] is None
    assert check_python(sys.executable, "--python-a") == {"commbench": commbench.__version__,
                                                          "path": commbench.__file__,
                                                          "git_revision": runinfo.git_revision()}


@pytest.mark.parametrize("body,message", [
    (f'echo "{PROTOCOL + 1} 7.0 1"\necho /x/commbench/__init__.py\necho -\n',
     f"runs commbench 7.0, whose ab turns speak protocol {PROTOCOL + 1}, not {PROTOCOL}: install the same commbench"),
    ("echo 'Traceback (most recent call last):' >&2\necho \"ModuleNotFoundError: No module named 'commbench'\" >&2\n"
     "exit 1\n", "cannot serve commbench ab's turns (ModuleNotFoundError: No module named 'commbench'): install"),
    ("exit 0\n", "cannot serve commbench ab's turns (no output)"),
    (f'echo "{PROTOCOL} 9.9 1"\necho a\necho b\necho c\n', "cannot serve commbench ab's turns"),
    ('echo "x 9.9 1"\necho /x\n', "cannot serve commbench ab's turns"),
])
def test_check_python_refuses_what_cannot_serve_the_turns(tmp_path, body, message):
    py = _python(tmp_path, body)
    with pytest.raises(InputError, match="^--python-b " + repr(py).replace("\\", "\\\\") + " "):
        check_python(py, "--python-b")
    with pytest.raises(InputError) as err:
        check_python(py, "--python-b")
    assert message in str(err.value)


def test_on_an_emulated_cluster_check_python_refuses_a_commbench_that_connects_by_tcp_only(tmp_path):
    """The ranks of an emulated cluster reach ab through a Unix socket: a commbench from before it
    (no turns.connect; the probe's fourth line) is refused before anything starts, not left to fail."""
    old = _python(tmp_path, f'echo "{PROTOCOL} 0.9 1"\necho /old/commbench/__init__.py\necho -\necho 0\n')
    with pytest.raises(InputError, match="runs commbench 0.9, whose ranks cannot reach ab on an emulated cluster"):
        check_python(old, "--python-a", emulated=True)
    assert check_python(sys.executable, "--python-a", emulated=True)["commbench"] == commbench.__version__


def test_check_python_refuses_a_commbench_the_current_folder_would_shadow(tmp_path, monkeypatch):
    """A Python before 3.11 ignores PYTHONSAFEPATH (its safe_path is 0): a commbench found in the
    current folder would be the one it runs."""
    monkeypatch.chdir(tmp_path)
    py = _python(tmp_path, f'echo "{PROTOCOL} 9.9 0"\necho {tmp_path}/commbench/__init__.py\necho -\n')
    with pytest.raises(InputError, match="would import commbench from the current folder"):
        check_python(py, "--python-a")
    monkeypatch.chdir(tmp_path.parent)
    assert check_python(py, "--python-a")["path"] == f"{tmp_path}/commbench/__init__.py"


def test_check_python_needs_a_program(tmp_path):
    with pytest.raises(InputError, match="is not a program"):
        check_python(str(tmp_path / "missing"), "--python-a")
    (tmp_path / "plain").write_text("#!/bin/sh\n")
    with pytest.raises(InputError, match=r"^--python-a '.*plain' is not a program \(give the python of a virtual"):
        check_python(str(tmp_path / "plain"), "--python-a")  # not executable
    with pytest.raises(InputError, match="is not a program"):
        check_python(str(tmp_path), "--python-a")  # a folder
