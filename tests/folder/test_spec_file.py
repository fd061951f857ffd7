"""commbench.folder.spec_file: the spec travels to the ranks as a file in the run folder (never in
argv), whole, by absolute path, one per side for `commbench ab`; and the errors when it cannot."""

import json
import os
import socket
import stat

import pytest

from commbench.errors import InputError
from commbench.folder import spec_file
from harness_fakes import small_spec


def test_the_spec_travels_whole_by_file(tmp_path):
    spec = small_spec(tmp_path, label="é" * 50, sizes=list(range(1, 5001)))
    argument = spec_file.encode_spec(spec)
    assert argument == str(tmp_path / "run" / spec_file.SPEC_FILE) and len(argument) < 500
    assert stat.S_IMODE(os.stat(argument).st_mode) == 0o644
    assert json.loads((tmp_path / "run" / spec_file.SPEC_FILE).read_text(encoding="utf-8")) == json.loads(spec.to_json())
    assert spec_file.decode_spec(argument) == spec
    # a later launch's spec replaces the file whole; a side's spec (commbench ab) has a name of its own
    spec.done_points = [0]
    assert spec_file.decode_spec(spec_file.encode_spec(spec)).done_points == [0]
    side = spec_file.encode_spec(spec, ".spec-A.json")
    assert side.endswith("/run/.spec-A.json") and spec_file.decode_spec(side) == spec
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [".spec-A.json", spec_file.SPEC_FILE]


def test_the_spec_path_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = small_spec(tmp_path, out_dir="relative/run")
    assert spec_file.spec_path(spec) == tmp_path / "relative" / "run" / spec_file.SPEC_FILE
    assert spec_file.encode_spec(spec) == str(tmp_path / "relative" / "run" / spec_file.SPEC_FILE)
    with pytest.raises(ValueError, match="the spec has no run folder yet"):
        spec_file.spec_path(small_spec(tmp_path, out_dir=""))


def test_a_spec_file_that_cannot_be_written_or_read(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match=f"^cannot create the run folder {str(tmp_path / 'file' / 'run')!r}: "):
        spec_file.encode_spec(small_spec(tmp_path, out_dir=str(tmp_path / "file" / "run")))
    missing = str(tmp_path / "elsewhere" / spec_file.SPEC_FILE)
    with pytest.raises(RuntimeError) as err:
        spec_file.decode_spec(missing)
    assert str(err.value).startswith(f"cannot read the spec file {missing!r} on {socket.gethostname()} (")
    assert "must be on a filesystem every node of the job shares" in str(err.value)


def test_fields_newer_than_older_ranks_reach_them_only_when_set():
    """`ab --python-a` runs the ranks of an older commbench on the spec this one writes: a field it does not know
    is refused there, so the newer fields are left out while they hold their defaults."""
    import dataclasses
    import json

    from commbench.spec import WHEN_SET, SweepSpec

    spec = SweepSpec(backends=["gloo"], nprocs=2).validate()
    assert not set(WHEN_SET) & set(json.loads(spec.to_json())) and SweepSpec.from_json(spec.to_json()) == spec
    late = dataclasses.replace(spec, inject_delay="1=0.5")
    assert json.loads(late.to_json())["inject_delay"] == "1=0.5" and SweepSpec.from_json(late.to_json()) == late
    assert set(WHEN_SET) <= {f.name for f in dataclasses.fields(SweepSpec)}
