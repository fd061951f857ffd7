"""commbench.folder.files.read_named: the one bounded reader of a file the user names (model, suite or
workload, trace)."""

import os

import pytest

from commbench.errors import InputError
from commbench.folder.files import read_named


def test_a_named_file_is_read_whole_up_to_its_bound_and_refused_beyond(tmp_path):
    f = tmp_path / "m.json"
    f.write_bytes(b"x" * 10)
    assert read_named(f, 10, "model", "10 B") == b"x" * 10
    with pytest.raises(InputError, match=f"^model {str(f)!r} is larger than 9 B, the most$"):
        read_named(f, 9, "model", "9 B, the most")


@pytest.mark.parametrize("make,why", [
    (lambda p: None, "No such file or directory"),
    (lambda p: p.mkdir(), "not a regular file"),
    (lambda p: os.mkfifo(p), "not a regular file"),  # opened, it would block forever
    (lambda p: p.symlink_to(p.parent / "nowhere"), "No such file or directory"),
])
def test_what_is_no_regular_file_is_refused_in_one_line_naming_it(tmp_path, make, why):
    p = tmp_path / "t.json"
    make(p)
    with pytest.raises(InputError, match=f"^cannot read trace {str(p)!r}: {why}"):
        read_named(p, 100, "trace", "100 B")
