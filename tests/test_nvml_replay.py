"""commbench's topology and power code on NVML answers recorded on real GPU machines
(tests/data/nvml/*.json, made by tests/gpu/record_nvml.py), played back by tests/nvml_replay.py:
the same GPUs, links, UUIDs and readings as the code computed there."""

import json
import sys
import time

import pytest

import nvml_replay
from commbench import machine, power

RECORDINGS = nvml_replay.recordings()


def each_recording(test):
    """Run `test(path, ...)` once per recording; skipped, with the reason, while there is none."""
    test = pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)(test)
    return pytest.mark.skipif(not RECORDINGS, reason="no NVML recording yet: run python tests/gpu/record_nvml.py "
                                                     "on a GPU machine")(test)


def _play(path, replay) -> tuple[dict, dict]:
    """The recording at `path` installed as pynvml: (recording, what the code computed there)."""
    recording = json.loads(path.read_text())
    replay(recording)
    return recording, recording["results"]


@pytest.fixture
def replay(monkeypatch):
    def install(recording):
        fake = nvml_replay.Replay(recording)
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake
    return install


def test_record_and_replay_on_this_machine(monkeypatch, replay):
    """What the real nvidia-ml-py answers here (no driver: every call fails the same way)
    comes back the same through a recording."""
    real = pytest.importorskip("pynvml")
    recorder = nvml_replay.Recorder(real)
    monkeypatch.setitem(sys.modules, "pynvml", recorder)
    live = (machine.gpus(), power.unavailable("cuda"))
    recording = json.loads(json.dumps({"calls": recorder.calls, "constants": recorder.constants}, default=list))
    assert recording["calls"], "the code asked NVML nothing"
    replay(recording)
    assert (machine.gpus(), power.unavailable("cuda")) == live


def test_an_unrecorded_question_fails(replay):
    fake = replay({"calls": {"nvmlInit()": [None]}, "constants": {}})
    fake.nvmlInit()
    with pytest.raises(AssertionError, match="was not asked"):
        fake.nvmlDeviceGetCount()


@each_recording
def test_topology_from_a_recording(path, replay):
    _, expected = _play(path, replay)
    gpus, pairs, reason = machine.gpus()
    assert reason is None and len(gpus) >= 1
    for got, want in zip(gpus, expected["gpus"], strict=True):
        assert {k: v for k, v in got.items() if k != "numa_node"} == {k: v for k, v in want.items() if k != "numa_node"}
        assert got["uuid"].startswith("GPU-") and got["memory_gib"] > 0
    assert pairs == expected["gpu_pairs"]  # paths and P2P capabilities of every pair


@each_recording
def test_power_from_a_recording(path, replay):
    recording, expected = _play(path, replay)
    assert power.unavailable("cuda") is None
    meter = power.PowerMeter([expected["uuid"]])
    meter.start()
    time.sleep(0.1)
    reading = meter.stop()
    assert reading.energy_j == pytest.approx(expected["reading"]["energy_j"])  # the counter's recorded delta
    samples = [w / 1e3 for key, values in recording["calls"].items() if key.startswith("nvmlDeviceGetPowerUsage")
               for w in values]
    assert min(samples) <= reading.power_w_avg <= reading.power_w_max <= max(samples)
    assert expected["reading"]["power_w_max"] == pytest.approx(max(samples))
