"""commbench's topology and power code on NVML answers recorded on real GPU machines
(tests/data/nvml/*.json, made by tests/gpu/record_nvml.py), played back by tests/nvml_replay.py:
the same GPUs, links, UUIDs and readings as the code computed there. Also, on hand-written
recordings, where the power meter takes its samples from (NVML's instantaneous field or the
1 s average) and that a Recorder's field values play back."""

import ctypes
import json
import sys
import time
import types

import pytest

import nvml_replay
from commbench.machine import inventory as machine
from commbench.machine import power

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
    assert meter.peak_source == expected["peak_source"]
    if meter.peak_source == power.INSTANT:  # each key's first answer is the probe, not a sample
        samples = [v[0]["struct"]["value"]["struct"]["uiVal"] / 1e3 for key, values in recording["calls"].items()
                   if key.startswith("nvmlDeviceGetFieldValues") for v in values[1:]]
    else:
        samples = [w / 1e3 for key, values in recording["calls"].items() if key.startswith("nvmlDeviceGetPowerUsage")
                   for w in values]
    assert reading.power_w_avg == pytest.approx(reading.energy_j / reading.seconds)  # energy over the window
    assert min(samples) <= reading.power_w_max <= max(samples)
    assert expected["reading"]["power_w_max"] == pytest.approx(max(samples))


INSTANT_FIELD = 186  # NVML_FI_DEV_POWER_INSTANT
FIELD_KEY = f"nvmlDeviceGetFieldValues(gpu0, [{INSTANT_FIELD}])"


def _field(mw: int, ret: int = 0) -> list:
    """nvmlDeviceGetFieldValues' answer for the instantaneous-power field, as a Recorder writes it."""
    return [{"struct": {"fieldId": INSTANT_FIELD, "scopeId": 0, "timestamp": 0, "latencyUsec": 0, "valueType": 1,
                        "nvmlReturn": ret, "value": {"struct": {"uiVal": mw}}}}]


def _one_gpu(field_answers: list | None, power_usage: list | None, instant_constant: bool = True) -> dict:
    """A recording of one GPU (energy counter 1 J, then 3.5 J); a question it leaves out fails."""
    calls = {"nvmlInit()": [None], "nvmlDeviceGetCount()": [1], "nvmlDeviceGetHandleByIndex(0)": [{"handle": "gpu0"}],
             "nvmlDeviceGetUUID(gpu0)": [{"bytes": "GPU-test"}],
             "nvmlDeviceGetTotalEnergyConsumption(gpu0)": [1_000, 3_500]}
    if field_answers is not None:
        calls[FIELD_KEY] = field_answers
    if power_usage is not None:
        calls["nvmlDeviceGetPowerUsage(gpu0)"] = power_usage
    constants = {"NVML_SUCCESS": 0} | ({"NVML_FI_DEV_POWER_INSTANT": INSTANT_FIELD} if instant_constant else {})
    return {"calls": calls, "constants": constants}


def _window(meter) -> power.Reading:
    meter.start()
    time.sleep(0.05)
    return meter.stop()


def test_power_peak_from_the_instant_field(replay):
    """A GPU that answers NVML_FI_DEV_POWER_INSTANT: the probe, then every sample, read it
    (nvmlDeviceGetPowerUsage is not in the recording, so asking it would fail)."""
    replay(_one_gpu([_field(300_000), _field(450_000), _field(320_000)], power_usage=None))
    meter = power.PowerMeter(["GPU-test"])
    assert meter.peak_source == power.INSTANT
    reading = _window(meter)
    assert reading.power_w_max == 450.0  # the probe's 300 W is no sample
    assert reading.power_w_avg == pytest.approx(2.5 / reading.seconds)  # the counter's 2.5 J over the window
    assert reading.energy_j == pytest.approx(2.5)


@pytest.mark.parametrize("field_answers, instant_constant", [
    ([_field(0, ret=3)], True),  # NVML_ERROR_NOT_SUPPORTED in the field's own nvmlReturn
    ([{"error": 13, "message": "Function Not Found"}], True),  # an older driver: the call fails
    (None, False),  # an nvidia-ml-py without the constant: NVML is not asked at all
], ids=["not-supported", "call-fails", "no-constant"])
def test_power_peak_falls_back_to_the_1s_average(replay, field_answers, instant_constant):
    """Without the instantaneous field the samples are nvmlDeviceGetPowerUsage's, and the meter
    says its peak is a 1 s average; the field is asked once (the probe), never per sample."""
    fake = replay(_one_gpu(field_answers, power_usage=[400_000, 250_000], instant_constant=instant_constant))
    meter = power.PowerMeter(["GPU-test"])
    assert meter.peak_source == power.ONE_SECOND_AVERAGE
    reading = _window(meter)
    assert reading.power_w_max == 400.0 and reading.power_w_avg == pytest.approx(2.5 / reading.seconds)
    assert fake._next.get(FIELD_KEY, 0) == (0 if field_answers is None else 1)


def test_open_meter_records_the_jobs_peak_source(replay, monkeypatch):
    """What run.json's power.peak_source is made from: every rank's meter, gathered."""
    replay(_one_gpu([_field(300_000)], power_usage=None))
    monkeypatch.setattr(power, "gpu_uuid", lambda: "GPU-test")
    one_rank = types.SimpleNamespace(rank=0, allgather_object=lambda obj: [obj])
    meter, reason = power.open_meter(one_rank, "cuda", "host")
    assert reason is None and meter.peak_source == meter.job_peak_source == power.INSTANT


def test_recorded_field_values_play_back(monkeypatch, replay):
    """nvmlDeviceGetFieldValues answers a ctypes array of c_nvmlFieldValue_t (a union inside):
    a Recorder saves what the meter reads of it, and the replay gives the meter the same."""
    real = pytest.importorskip("pynvml")
    handle = ctypes.pointer(real.struct_c_nvmlDevice_t())

    def field_values(h, ids):
        values = (real.c_nvmlFieldValue_t * len(ids))()
        for v, i in zip(values, ids, strict=True):
            v.fieldId, v.valueType, v.nvmlReturn = i, real.NVML_VALUE_TYPE_UNSIGNED_INT, real.NVML_SUCCESS
            v.value.uiVal = 412_345
        return values

    gpu = types.SimpleNamespace(
        NVMLError=real.NVMLError, NVML_SUCCESS=real.NVML_SUCCESS,
        NVML_FI_DEV_POWER_INSTANT=real.NVML_FI_DEV_POWER_INSTANT, nvmlInit=lambda: None,
        nvmlDeviceGetCount=lambda: 1, nvmlDeviceGetHandleByIndex=lambda i: handle,
        nvmlDeviceGetUUID=lambda h: "GPU-test", nvmlDeviceGetFieldValues=field_values,
        nvmlDeviceGetTotalEnergyConsumption=lambda h: 7_000)
    recorder = nvml_replay.Recorder(gpu)
    monkeypatch.setitem(sys.modules, "pynvml", recorder)
    live = power.PowerMeter(["GPU-test"])
    live_reading = _window(live)
    recording = json.loads(json.dumps({"calls": recorder.calls, "constants": recorder.constants}, default=list))
    assert f"nvmlDeviceGetFieldValues(gpu0, [{real.NVML_FI_DEV_POWER_INSTANT}])" in recording["calls"]
    replay(recording)
    played = power.PowerMeter(["GPU-test"])
    assert live.peak_source == played.peak_source == power.INSTANT
    assert _window(played).power_w_max == live_reading.power_w_max == pytest.approx(412.345)
