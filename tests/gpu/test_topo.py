"""`commbench topo` on a GPU machine (skipped without one): NVML lists the GPUs and their links."""

import json

import pytest

from conftest import commbench
from commbench.errors import OK

pytestmark = pytest.mark.gpu
pytest.importorskip("pynvml")


def test_topo_lists_gpus():
    info = json.loads(commbench("topo", "--json", check_rc=OK).stdout)
    assert info["gpus"] and info["gpus_unavailable"] is None
    for g in info["gpus"]:
        assert g["uuid"].startswith("GPU-") and g["memory_gib"] > 1 and g["nvlinks_up"] >= 0
    assert len(info["gpu_pairs"]) == len(info["gpus"]) * (len(info["gpus"]) - 1) // 2
