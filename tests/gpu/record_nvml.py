"""Record NVML's answers to commbench's topology and power code on this GPU machine, for the CPU
tests (tests/machine/test_nvml_replay.py):

    python tests/gpu/record_nvml.py        # writes tests/data/nvml/<gpu>-x<count>.json

It runs machine.gpus(), power.unavailable() and one PowerMeter window of >= power.WINDOW_S
over back-to-back matrix multiplications through tests/nvml_replay.Recorder, and saves every
NVML call and constant with what that code computed from them.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pynvml  # noqa: E402
import torch  # noqa: E402

from nvml_replay import RECORDINGS, Recorder  # noqa: E402


def main() -> None:
    recorder = Recorder(pynvml)
    sys.modules["pynvml"] = recorder  # what commbench imports from here on
    from commbench.machine import inventory as machine
    from commbench.machine import power

    gpus, pairs, reason = machine.gpus()
    unavailable = power.unavailable("cuda")
    uuid = power.gpu_uuid()
    meter = power.PowerMeter([uuid])
    x = torch.randn(8192, 8192, device="cuda")
    torch.cuda.synchronize()
    meter.start()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < power.WINDOW_S * 1.5:
        x = torch.tanh(x @ x)
        torch.cuda.synchronize()
    reading = meter.stop()

    pynvml.nvmlInit()
    about = {"recorded": datetime.now(timezone.utc).isoformat(timespec="seconds"),
             "driver": str(pynvml.nvmlSystemGetDriverVersion()), "nvidia_ml_py": getattr(pynvml, "__version__", None),
             "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}
    results = {"gpus": gpus, "gpu_pairs": pairs, "gpus_unavailable": reason, "power_unavailable": unavailable,
               "uuid": uuid, "reading": asdict(reading), "peak_source": meter.peak_source}
    name = re.sub(r"[^A-Za-z0-9]+", "-", about["gpu"]).strip("-").lower()
    out = RECORDINGS / f"{name}-x{len(gpus)}.json"
    recorder.save(out, results, about)
    print(f"{out}: {sum(map(len, recorder.calls.values()))} calls; {results['reading']}")


if __name__ == "__main__":
    main()
