"""commbench.run.srun.mpi_plugin's answer, remembered per job in the shared temporary folder under a
predictable name (issue 67, H3): only a regular file this user wrote, holding an answer, is believed;
a planted file, link or word is probed again, and the answer is written without following a link."""

import os

import pytest

from commbench import slurm
from commbench.run import srun

ALLOC = slurm.Allocation("4242", ["n1"], [2], 2, None)


@pytest.fixture
def probe(tmp_path, monkeypatch):
    """The temporary folder in tmp_path, and srun's probe as a list of calls (pmi2 forms a world)."""
    monkeypatch.setattr(srun.tempfile, "gettempdir", lambda: str(tmp_path))
    calls = []
    monkeypatch.setattr(srun, "offered", lambda binary: ["pmix", "pmi2"])
    monkeypatch.setattr(srun, "_forms_world", lambda binary, plugin, alloc: calls.append(plugin) or plugin == "pmi2")
    return calls


def _cache(tmp_path):
    [found] = [p for p in tmp_path.iterdir() if p.name.startswith("commbench-srun-mpi-4242-")] or [None]
    return found


def test_the_answer_is_probed_once_and_remembered(tmp_path, probe):
    assert srun.mpi_plugin("srun", ALLOC) == "pmi2" and probe == ["pmix", "pmi2"]
    assert srun.mpi_plugin("srun", ALLOC) == "pmi2" and probe == ["pmix", "pmi2"]  # remembered
    assert _cache(tmp_path).read_text() == "pmi2" and oct(_cache(tmp_path).stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("planted", ["another user's file", "a word that is no answer", "a link"])
def test_a_planted_answer_is_not_believed(tmp_path, probe, planted):
    srun.mpi_plugin("srun", ALLOC)
    cache = _cache(tmp_path)
    probe.clear()
    if planted == "a link":
        cache.unlink()
        (tmp_path / "elsewhere").write_text("pmix")
        cache.symlink_to(tmp_path / "elsewhere")
    else:
        cache.write_text("none" if planted == "a word that is no answer" else "pmix")
        if planted == "another user's file":
            if os.geteuid() != 0:
                pytest.skip("giving a file to another user needs root")
            os.chown(cache, 12345, 12345)
    assert srun.mpi_plugin("srun", ALLOC) == "pmi2" and probe == ["pmix", "pmi2"]  # probed again, not "--mpi=none"
    assert cache.read_text() == "pmi2" and not cache.is_symlink()
    if planted == "a link":
        assert (tmp_path / "elsewhere").read_text() == "pmix"  # the link's target untouched
