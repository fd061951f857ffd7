"""Other benchmarks' output -> commbench's results layout, so report and compare show
nccl-tests, OSU and commbench numbers side by side.

* nccl-tests text output (the table printed by all_reduce_perf & co.) and its JSON report
  (`-J FILE`): one row per size and buffer mode; per-iteration times become samples when the
  JSON holds them, else the reported average is the one sample.
* OSU Micro-Benchmarks collective latency tests (osu_allreduce & co.), default and `-f`
  output. OSU does not print the number of ranks: give it (--nprocs).

The collectives say which names the tools give them (Collective.nccl_tests_name, osu_title).
Sizes follow commbench's (nccl-tests') semantics: OSU's size is what each rank contributes
(Collective.size_for_input: all-gather's is multiplied by the number of ranks).
"""

from __future__ import annotations

import json
import re

import numpy as np
from dataclasses import dataclass, field
from pathlib import Path

from commbench.errors import InputError
from commbench.metrics import summarize
from commbench.rank.collectives import COLLECTIVES
from commbench.results import build_row
from commbench.run.folder import RunFolder

NCCL_TYPES = {"float": "float32", "half": "float16", "double": "float64", "bfloat16": "bfloat16", "int8": "int8",
              "uint8": "uint8", "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
              "int": "int32", "char": "int8", "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2"}
ITEMSIZE = {"float32": 4, "float16": 2, "float64": 8, "bfloat16": 2, "int8": 1, "uint8": 1, "int32": 4,
            "uint32": 4, "int64": 8, "uint64": 8, "float8_e4m3": 1, "float8_e5m2": 1}
OSU_TYPES = {"MPI_CHAR": "int8", "MPI_INT": "int32", "MPI_FLOAT": "float32", "MPI_DOUBLE": "float64"}


def _nccl_tests_collective(text: str) -> str | None:
    """The collective whose nccl-tests binary (<nccl_tests_name>_perf) `text` names, if any."""
    names = {c.nccl_tests_name: name for name, c in COLLECTIVES.items() if c.nccl_tests_name}
    found = re.search(r"\b(" + "|".join(map(re.escape, names)) + r")_perf\b", text) if names else None
    return names[found.group(1)] if found else None


def _osu_titles() -> dict[str, str]:
    """OSU's test title, lower-cased -> collective."""
    return {c.osu_title.lower(): name for name, c in COLLECTIVES.items() if c.osu_title}


@dataclass
class Imported:
    source: str
    collective: str
    world: int
    backend: str
    points: list[dict] = field(default_factory=list)  # size_bytes, count, dtype, op, in_place, time_us, samples, wrong, ...
    meta: dict = field(default_factory=dict)


def _bad(path, why) -> InputError:
    return InputError(f"{path}: {why}")


# --- nccl-tests ---------------------------------------------------------------------------------

def parse_nccl_tests_text(text: str, path: str = "<text>", collective: str | None = None) -> Imported:
    devices = re.findall(r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.*)$",
                         text, re.M)
    if not devices:
        raise _bad(path, "no '#  Rank N Group ... device' lines: not nccl-tests output, or cut short")
    collective = collective or _nccl_tests_collective(text)
    if collective is None:
        raise _bad(path, "cannot tell which collective this nccl-tests output measured (give --collective)")
    imp = Imported("nccl-tests", collective, len(devices), "nccl",
                   meta={"hosts": sorted({h for _, h, _ in devices}), "gpus": sorted({g.strip() for _, _, g in devices})})
    header = re.search(r"^# nThread .*$", text, re.M)
    if header:
        imp.meta["nccl_tests_config"] = header.group(0)[2:]
    version = re.search(r"^# nccl-tests version (\S+).*nccl-library=(\d+)", text, re.M)
    if version:
        imp.meta["nccl_tests_version"], imp.meta["nccl_version"] = version.group(1), version.group(2)
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#") or not parts[0].isdigit():
            continue
        if len(parts) not in (13, 12):  # size count type redop [root] then 2 x (time algbw busbw #wrong)
            continue
        size, count, dtype, op = int(parts[0]), int(parts[1]), parts[2], parts[3]
        body = parts[5:] if len(parts) == 13 else parts[4:]
        for in_place, (t, _alg, _bus, wrong) in ((0, body[0:4]), (1, body[4:8])):
            imp.points.append(_nccl_point(size, count, dtype, op, in_place, float(t), None if wrong == "N/A" else int(float(wrong))))
    if not imp.points:
        raise _bad(path, "no result lines found in the nccl-tests output")
    return imp


def _nccl_point(size, count, dtype, op, in_place, time_us, wrong, samples=None):
    return {"size_bytes": size, "count": count, "dtype": NCCL_TYPES.get(dtype, dtype), "op": op, "in_place": in_place,
            "time_us": time_us, "wrong": wrong, "samples": samples or [time_us]}


def parse_nccl_tests_json(text: str, path: str = "<json>", collective: str | None = None) -> Imported:
    try:
        doc = json.loads(text)
        results, config, args = doc["results"], doc.get("config") or {}, doc.get("args") or []
        if not (isinstance(results, list) and all(isinstance(r, dict) for r in results) and isinstance(config, dict)
                and isinstance(args, list) and isinstance(config.get("devices") or [], list)):
            raise TypeError("results, config, args or devices have the wrong type")
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise _bad(path, f"not an nccl-tests JSON report ({exc.__class__.__name__}: {exc})") from None
    program = " ".join(map(str, args))
    collective = collective or _nccl_tests_collective(
        program + " " + json.dumps([r.get("experiment_name", "") for r in results]))
    if collective is None:
        raise _bad(path, "cannot tell which collective this report measured (give --collective)")
    devices = config.get("devices") or []
    if not devices:
        raise _bad(path, "the report lists no devices")
    if not all(isinstance(d, dict) for d in devices):
        raise _bad(path, "the report's devices are not objects")
    imp = Imported("nccl-tests", collective, len(devices), "nccl",
                   meta={"hosts": sorted({str(d.get("hostname", "?")) for d in devices}),
                         "gpus": sorted({str(d.get("device_info", "?")) for d in devices}),
                         "nccl_version": doc.get("nccl_version"), "command_line": doc.get("args"),
                         "start_time": doc.get("start_time"), "end_time": doc.get("end_time")})
    for r in results:
        try:
            for in_place, key in ((0, "out_of_place"), (1, "in_place")):
                body = r.get(key)
                if not body:
                    continue
                time_us = float(body.get("time", body.get("cpu_time")))
                per_iter = (r.get(f"{key}_per_iter") or {}).get("times_us")
                wrong = body.get("nwrong")
                imp.points.append(_nccl_point(int(r["size"]), int(r["count"]), r["type"], r["redop"], in_place, time_us,
                                              None if wrong is None else int(float(wrong)),
                                              [float(x) for x in per_iter] if per_iter else None))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _bad(path, f"malformed result entry {str(r)[:80]} ({exc.__class__.__name__})") from None
    if not imp.points:
        raise _bad(path, "the report holds no results")
    return imp


def parse_nccl_tests(text: str, path: str = "<input>", collective: str | None = None) -> Imported:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return parse_nccl_tests_json(text, path, collective)
    return parse_nccl_tests_text(text, path, collective)


# --- OSU ------------------------------------------------------------------------------------------

def parse_osu(text: str, path: str = "<input>", world: int | None = None) -> Imported:
    title, titles = re.search(r"^# OSU MPI (\w+) Latency Test", text, re.M), _osu_titles()
    if not title or title.group(1).lower() not in titles:
        raise _bad(path, f"not OSU {' / '.join(n.replace('_', '-') for n in titles.values())} latency output "
                         f"(no '# OSU MPI {'|'.join(COLLECTIVES[n].osu_title for n in titles.values())} Latency Test' line)")
    if world is None or world < 1:
        raise _bad(path, "OSU output does not record the number of ranks: give --nprocs")
    collective = titles[title.group(1).lower()]
    coll = COLLECTIVES[collective]
    dtype_m = re.search(r"^# Datatype: (\w+)", text, re.M)
    dtype = OSU_TYPES.get(dtype_m.group(1), dtype_m.group(1)) if dtype_m else "int8"
    imp = Imported("osu", collective, world, "mpi", meta={"osu_datatype": dtype_m.group(1) if dtype_m else None})
    columns = None
    for line in text.splitlines():
        if line.startswith("# Size"):
            columns = re.findall(r"[A-Za-z][A-Za-z ]*?(?:\(us\))?(?=\s{2,}|$)", line[2:])
            columns = [c.strip() for c in columns]
            continue
        parts = line.split()
        if not parts or line.startswith("#") or not parts[0].isdigit():
            continue
        if columns is None or len(parts) != len(columns):
            raise _bad(path, f"result line does not match the header: {line.strip()!r:.80}")
        values = dict(zip(columns, parts, strict=True))
        msg = int(values["Size"])
        size = coll.size_for_input(msg, world)
        validation = values.get("Validation")
        try:
            avg = float(values["Avg Latency(us)"])
        except (KeyError, ValueError):
            raise _bad(path, f"no average latency in {line.strip()!r:.80}") from None
        point = {"size_bytes": size, "count": size // ITEMSIZE.get(dtype, 1), "dtype": dtype,
                 "op": "sum" if coll.reduces else "none", "in_place": 0, "time_us": avg,
                 "wrong": None if validation is None else (0 if validation.lower() == "pass" else 1),
                 "samples": [avg], "iterations": int(values["Iterations"]) if "Iterations" in values else None}
        if "Min Latency(us)" in values:  # over ranks of each rank's average, not over iterations
            point["rank_min_us"], point["rank_max_us"] = float(values["Min Latency(us)"]), float(values["Max Latency(us)"])
        imp.points.append(point)
    if not imp.points:
        raise _bad(path, "no result lines found in the OSU output")
    return imp


# --- writing ------------------------------------------------------------------------------------

def write_import(imp: Imported, out_dir: str | Path, source_file: str, label: str, run_id: str) -> Path:
    folder = RunFolder(out_dir)
    folder.create({"run_id": run_id, "label": label, "imported_from": imp.source, "source_file": source_file,
                   "world_size": imp.world, **imp.meta})
    for i, p in enumerate(imp.points):
        stats = {}
        if len(p["samples"]) > 1:  # per-iteration times: the headline is their median, as in commbench
            stats = summarize(np.asarray(p["samples"]) * 1e-6)
            stats["time_us_mean"] = p["time_us"]  # what the tool reported (its average)
        fields = {"run_id": run_id, "label": label, "point": i, "collective": imp.collective, "backend": imp.backend,
                  "algorithm": "native", "device": "cuda" if imp.backend == "nccl" else "cpu", "dtype": p["dtype"],
                  "op": p["op"], "in_place": p["in_place"], "world_size": imp.world,
                  "nodes": len(imp.meta.get("hosts", [])) or None, "size_bytes": p["size_bytes"], "count": p["count"],
                  "time_us": p["time_us"], "time_us_mean": p["time_us"], "samples": len(p["samples"]),
                  "iterations": p.get("iterations") or len(p["samples"]), "batch": 1,
                  "wrong": "" if p["wrong"] is None else p["wrong"], **stats}
        folder.add(build_row(**fields), p["samples"])
    folder.finalize()
    folder.update({"status": "completed", "points_measured": len(imp.points),
                   "wrong_total": sum(p["wrong"] or 0 for p in imp.points)})
    return folder.dir
