"""Power and energy per point (`--power`): the GPUs from NVML (here), the CPU packages and DRAM from
RAPL (commbench.machine.cpu_power), over the same window; `open_meters` opens both for a job.

Each GPU is measured once, by the lowest rank using it (ranks sharing a GPU are deduplicated by
UUID). Over a measurement window of at least WINDOW_S seconds of back-to-back calls (NVML's
energy counter advances only about every 100 ms, so shorter windows would mostly measure its
steps) a rank reads:
  * the delta of nvmlDeviceGetTotalEnergyConsumption (mJ since the driver loaded), and
  * the GPU's power (mW) every SAMPLE_S in a thread: average and peak. Where the GPU offers it
    (NVML_FI_DEV_POWER_INSTANT through nvmlDeviceGetFieldValues, probed once per GPU when the
    meter opens) that is the instantaneous power; else nvmlDeviceGetPowerUsage, which on recent
    GPUs and drivers is an average over the last second, so its peak is no instantaneous peak.
    The meter's peak_source says which: INSTANT or ONE_SECOND_AVERAGE (MIXED across a job
    whose GPUs differ); run.json records the job's as power.peak_source.
Rows then carry, summed over the GPUs of the job: power_w_avg (energy / window), power_w_max (the
sum of each GPU's peak sample, an upper bound on the simultaneous peak), energy_j (joules per
call) and energy_j_per_byte (energy_j / size_bytes); and for the CPUs, summed over the nodes:
cpu_power_w_avg, cpu_energy_j (joules per call), cpu_energy_j_per_byte and cpu_power_domains (each
domain's average power, e.g. "package-0 41.2 W, dram-0 6.1 W"). What cannot be measured leaves its
columns empty and the run says why in one line.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

WINDOW_S = 1.0
SAMPLE_S = 0.02
INSTANT, ONE_SECOND_AVERAGE, MIXED = "instant", "1s-average", "mixed"  # where the power samples come from


@dataclass
class Reading:
    energy_j: float  # over the window, this rank's GPUs
    power_w_avg: float
    power_w_max: float
    seconds: float


def _nvml():
    import pynvml  # nvidia-ml-py

    pynvml.nvmlInit()
    return pynvml


def unavailable(device: str) -> str | None:
    """Why power cannot be measured here, or None."""
    if device != "cuda":
        return "power is measured on GPUs only (--device cuda)"
    try:
        nvml = _nvml()
    except ImportError:
        return "nvidia-ml-py is not installed (pip install 'commbench[cuda]')"
    except Exception as exc:  # noqa: BLE001 - any NVML failure means no power readings
        return f"NVML is not usable: {exc}"
    if nvml.nvmlDeviceGetCount() == 0:
        return "NVML sees no GPU"
    return None


def gpu_uuid() -> str:
    """UUID of this rank's current CUDA device, as NVML spells it."""
    import torch

    uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
    return uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"


class PowerMeter:
    """Energy counter delta and sampled power of the GPUs with the given UUIDs."""

    def __init__(self, uuids: list[str]):
        nvml = _nvml()
        self._nvml = nvml
        by_uuid = {}
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            u = nvml.nvmlDeviceGetUUID(h)
            by_uuid[u.decode() if isinstance(u, bytes) else u] = h
        missing = [u for u in uuids if u not in by_uuid]
        if missing:
            raise RuntimeError(f"NVML does not list GPU {missing[0]}")
        self._handles = [by_uuid[u] for u in uuids]
        self._instant = [_instant_mw(nvml, h) is not None for h in self._handles]
        self.peak_source = combine_sources([INSTANT if i else ONE_SECOND_AVERAGE for i in self._instant])
        self._samples: list[float] = []
        self._stop = threading.Event()

    def _power_w(self) -> float:
        nvml = self._nvml
        return sum(_instant_mw(nvml, h, strict=True) if instant else nvml.nvmlDeviceGetPowerUsage(h)
                   for h, instant in zip(self._handles, self._instant, strict=True)) / 1e3

    def _energy_j(self) -> float:
        return sum(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self._handles) / 1e3

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self._samples.append(self._power_w())

    def start(self) -> None:
        self._samples = [self._power_w()]
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._t0, self._e0 = time.perf_counter(), self._energy_j()
        self._thread.start()

    def stop(self) -> Reading:
        energy, seconds = self._energy_j() - self._e0, time.perf_counter() - self._t0
        self._stop.set()
        self._thread.join()
        self._samples.append(self._power_w())
        return summarize(energy, self._samples, seconds)


def _instant_mw(nvml, handle, strict: bool = False) -> int | None:
    """The GPU's instantaneous power (mW) from NVML's field; None where this GPU, driver or
    nvidia-ml-py does not offer it (strict: raise NVMLError instead)."""
    field = getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", None)
    if field is None:
        return None
    try:
        value = nvml.nvmlDeviceGetFieldValues(handle, [field])[0]
        if value.nvmlReturn != nvml.NVML_SUCCESS:
            raise nvml.NVMLError(value.nvmlReturn)
    except nvml.NVMLError:
        if strict:
            raise
        return None
    return value.value.uiVal


def combine_sources(sources: list[str | None]) -> str | None:
    """One peak source for several GPUs (None: a rank that measures none)."""
    known = {s for s in sources if s is not None}
    return None if not known else (known.pop() if len(known) == 1 else MIXED)


def summarize(energy_j: float, samples_w: list[float], seconds: float) -> Reading:
    """One window's reading: the average power is the energy counter's delta over the window
    (unlike the samples' mean it misses no spike; the counter steps about every 100 ms, so over
    a window of >= WINDOW_S it is within about 10 %; the samples' mean only where the counter did
    not move), the peak the largest sample."""
    if energy_j > 0 and seconds > 0:
        avg = energy_j / seconds
    else:
        avg = sum(samples_w) / len(samples_w) if samples_w else float("nan")
    return Reading(energy_j, avg, max(samples_w, default=float("nan")), seconds)


def calls_for_window(per_call_s: float) -> int:
    """Back-to-back calls that fill at least WINDOW_S."""
    return max(1, int(WINDOW_S / max(per_call_s, 1e-7)) + 1)


class NullMeter:
    """Stands in on ranks whose GPU another rank measures: reads nothing."""

    peak_source = None

    def start(self) -> None:
        pass

    def stop(self) -> Reading:
        return Reading(0.0, 0.0, 0.0, 0.0)


def open_meter(comm, device: str, hostname: str):
    """(meter, None) on every rank when all can measure (a NullMeter where another rank owns
    the GPU), else (None, reason) on every rank. Collective. The meter's job_peak_source is where
    the power samples of the whole job come from (see the module)."""
    reason = unavailable(device)
    uuid = None
    if reason is None:
        try:
            uuid = gpu_uuid()
        except Exception as exc:  # noqa: BLE001
            reason = f"cannot identify this rank's GPU: {exc}"
    everyone = comm.allgather_object((reason, hostname, uuid))
    reasons = [r for r, _, _ in everyone if r]
    if reasons:
        return None, reasons[0]
    owner = next(i for i, (_, h, u) in enumerate(everyone) if (h, u) == (hostname, uuid))
    meter = PowerMeter([uuid]) if owner == comm.rank else NullMeter()
    meter.job_peak_source = combine_sources(comm.allgather_object(meter.peak_source))
    return meter, None


class Meters:
    """The job's meters, each optional: GPUs (PowerMeter / NullMeter) and CPUs (cpu_power). A window's
    readings travel as one vector (`stop`), summed over the ranks, then become row columns (`columns`)."""

    def __init__(self, gpu=None, cpu=None, cpu_domains: list[str] | None = None):
        self.gpu, self.cpu, self.cpu_domains = gpu, cpu, list(cpu_domains or [])

    def start(self) -> None:
        for meter in (self.gpu, self.cpu):
            if meter is not None:
                meter.start()

    def stop(self) -> list[float]:
        values = []
        if self.gpu is not None:
            r = self.gpu.stop()
            values += [r.energy_j, r.power_w_avg, r.power_w_max]
        if self.cpu is not None:
            c = self.cpu.stop()
            values += [c.energy_j, c.energy_j / c.seconds if c.seconds > 0 else 0.0]
            values += [c.domains.get(d, 0.0) / c.seconds if c.seconds > 0 else 0.0 for d in self.cpu_domains]
        return values

    def columns(self, total: list[float], calls: int) -> dict:
        """The row's power columns from the vector summed over ranks, for `calls` calls in the window."""
        out, i = {}, 0
        if self.gpu is not None:
            out.update(energy_j=float(total[0]) / calls, power_w_avg=float(total[1]), power_w_max=float(total[2]))
            i = 3
        if self.cpu is not None:
            out.update(cpu_energy_j=float(total[i]) / calls, cpu_power_w_avg=float(total[i + 1]),
                       cpu_power_domains=", ".join(f"{d} {w:.1f} W" for d, w in zip(self.cpu_domains, total[i + 2:],
                                                                                   strict=True)))
        return out


def open_meters(comm, device: str, hostname: str) -> tuple[Meters | None, dict]:
    """The job's meters (None when nothing can be measured) and what run.json records of them: for
    the GPUs (only where --device cuda) and the CPUs, measured or why not. Collective."""
    from commbench.machine import cpu_power

    gpu, gpu_reason = (open_meter(comm, device, hostname) if device == "cuda"
                       else (None, "no GPU in this run (--device cpu)"))
    cpu, source, domains, cpu_reason = cpu_power.open_meter(comm, hostname)
    facts = {"gpu": {"measured": gpu is not None, "reason": gpu_reason,
                     "peak_source": gpu.job_peak_source if gpu is not None else None},
             "cpu": {"measured": cpu is not None, "reason": cpu_reason, "source": source, "domains": domains}}
    meters = Meters(gpu, cpu, domains) if gpu is not None or cpu is not None else None
    return meters, facts


def note(device: str, facts: dict) -> str | None:
    """The one line a run prints about what --power could not measure, or None."""
    missing = [f"{kind.upper()} power not measured: {facts[kind]['reason']}" for kind in ("gpu", "cpu")
               if not facts[kind]["measured"] and (kind == "cpu" or device == "cuda")]
    return "; ".join(missing) or None
