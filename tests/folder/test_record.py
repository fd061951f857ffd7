"""run.json's record (commbench.folder.record): the writer refuses a field it does not define or a value of
another type, nothing written; status is a RunStatus; rank 0's facts keep what another commbench sent; the
reader checks the fields readers rely on; a real run's run.json holds only defined fields."""

import json

import pytest

from commbench.errors import OK, InputError
from commbench.folder import record
from commbench.folder.load import read_meta
from commbench.folder.schema import FORMAT_VERSION, RunStatus
from commbench.folder.write import RunFolder
from conftest import commbench, needs_mpirun


@pytest.fixture
def folder(tmp_path):
    f = RunFolder(tmp_path / "run")
    f.create({"run_id": "r1", "label": "lab", "status": "running"})
    yield f
    f.release()


def _on_disk(f) -> dict:
    return json.loads((f.dir / "run.json").read_text())


def test_every_field_has_a_type_and_a_meaning():
    assert all(f.kinds and f.doc and f.name == name for name, f in record.FIELDS.items())
    assert record.FIELDS["status"].doc.endswith(", ".join(s.value for s in RunStatus))


@pytest.mark.parametrize("patch,message", [
    ({"stauts": "completed"}, "run.json has no field 'stauts'"),
    ({"points_measured": "3"}, "field 'points_measured' must be an integer, not \"3\""),
    ({"points_measured": True}, "must be an integer, not true"),
    ({"jobs": {"1": {}}}, "field 'jobs' must be a list"),
    ({"nccl_version": 2.5}, "must be a string or an integer"),
])
def test_the_writer_refuses_a_field_not_defined_or_of_another_type(folder, patch, message):
    before = _on_disk(folder)
    with pytest.raises(TypeError, match=message.replace("(", r"\(")):
        folder.update({"wrong_total": 0, **patch})  # nothing of the change is written
    assert _on_disk(folder) == before


def test_status_is_a_run_status_and_no_other_text(folder):
    assert folder.update({"status": "completed"})["status"] is RunStatus.COMPLETED
    with pytest.raises(ValueError):
        folder.update({"status": "done"})
    assert _on_disk(folder)["status"] == "completed"


def test_null_is_not_recorded_for_any_field_and_create_writes_the_version(folder):
    folder.update({"error": None, "slurm": None, "seconds": 3})  # an integer is a number
    meta = _on_disk(folder)
    assert meta["format_version"] == FORMAT_VERSION and meta["error"] is None and meta["seconds"] == 3


def test_rank_facts_keep_what_another_commbench_sent_and_check_what_is_known(folder):
    assert folder.record({"event": "facts", "run": {"world_size": 2, "a_newer_fact": [1]}})
    assert _on_disk(folder)["a_newer_fact"] == [1] and folder.has_facts
    with pytest.raises(TypeError, match="'world_size' must be an integer"):
        folder.record({"event": "facts", "run": {"world_size": "2"}})


@pytest.mark.parametrize("name,value", [(name, 7) for name, f in record.FIELDS.items() if f.read])
def test_the_reader_refuses_a_field_readers_rely_on_of_another_type(tmp_path, name, value):
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", name: value} if name != "run_id" else {name: value}))
    with pytest.raises(InputError, match=f"field {name!r} must be {record.FIELDS[name].what}, not 7"):
        read_meta(tmp_path)


def test_the_reader_takes_fields_it_does_not_rely_on_as_written(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "rounds": "many", "unknown": 1, "label": None}))
    assert read_meta(tmp_path) == {"run_id": "r", "rounds": "many", "unknown": 1}  # null: not recorded


@needs_mpirun
def test_a_real_runs_record_holds_only_defined_fields_of_their_types(job, tmp_path):
    out = tmp_path / "run"
    commbench("run", "-n", 2, "-c", "all_reduce", "-b", 8, "-e", 8, "--iters", 2, "--out", out, "--quiet", check_rc=OK)
    meta = json.loads((out / "run.json").read_text())
    assert set(meta) <= set(record.FIELDS), set(meta) - set(record.FIELDS)
    assert all(record.FIELDS[k].fits(v) for k, v in meta.items())
    assert {"spec", "ranks", "versions", "floors", "machines", "points_measured", "end_time"} <= set(meta)
    rows = (out / "results.csv").read_text().splitlines()[1:]
    assert meta["status"] == "completed" and meta["points_measured"] == len(rows) > 0
