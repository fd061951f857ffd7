"""NVML's answers recorded on a real GPU machine and played back here, where there is none.

Recorder wraps pynvml and notes every call commbench makes (name, arguments, result or error)
and every constant it reads; tests/gpu/record_nvml.py runs commbench's NVML code through it on a
GPU machine and saves the lot with what that code computed (tests/data/nvml/*.json). Replay stands
in for pynvml on the CPU (installed as sys.modules["pynvml"]) and answers each call with what was
recorded for it, in order (the last answer repeats), so commbench's own topology and power code
runs on real answers. A call that was never recorded fails the test: the code asked NVML
something new, and needs a new recording.
"""

from __future__ import annotations

import ctypes
import json
import threading
from pathlib import Path

RECORDINGS = Path(__file__).resolve().parent / "data" / "nvml"


class Recorder:
    def __init__(self, nvml):
        self._nvml = nvml
        self.calls: dict[str, list] = {}
        self.constants: dict[str, object] = {}
        self._handles: dict[int, str] = {}
        self._lock = threading.Lock()

    def __getattr__(self, name):
        value = getattr(self._nvml, name)
        if name.startswith("NVML_"):
            self.constants[name] = value
        if not name.startswith("nvml") or not callable(value):
            return value
        return lambda *args: self._call(name, value, args)

    def _call(self, name, fn, args):
        key = call_key(name, [self._arg(a) for a in args])
        try:
            result = fn(*args)
        except self._nvml.NVMLError as exc:
            self._note(key, {"error": exc.value, "message": str(exc)})
            raise
        if name == "nvmlDeviceGetHandleByIndex":
            self._handles[_address(result)] = f"gpu{args[0]}"
        self._note(key, self._encode(result))
        return result

    def _note(self, key, value):
        with self._lock:
            self.calls.setdefault(key, []).append(value)

    def _arg(self, a):
        return self._handles.get(_address(a), a) if isinstance(a, ctypes._Pointer) else a

    def _encode(self, value):
        if isinstance(value, ctypes._Pointer):
            return {"handle": self._handles.get(_address(value), "unknown")}
        if isinstance(value, bytes):
            return {"bytes": value.decode("latin-1")}
        if isinstance(value, (ctypes.Structure, ctypes.Union)):  # a union: every reading of it
            return {"struct": {f[0]: self._encode(getattr(value, f[0])) for f in value._fields_}}
        if isinstance(value, ctypes.Array):  # e.g. nvmlDeviceGetFieldValues' c_nvmlFieldValue_t array
            return [self._encode(v) for v in value]
        return value

    def save(self, path: Path, results: dict, about: dict) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"about": about, "results": results, "calls": self.calls,
                                    "constants": self.constants}, indent=1, sort_keys=True, default=list) + "\n")


def call_key(name: str, args: list) -> str:
    return f"{name}({', '.join(map(str, args))})"


def _address(pointer) -> int | None:
    return ctypes.cast(pointer, ctypes.c_void_p).value if isinstance(pointer, ctypes._Pointer) else None


class NVMLError(Exception):
    def __init__(self, value, message=""):
        super().__init__(message)
        self.value, self.message = value, message

    def __str__(self):
        return self.message


class Replay:
    """pynvml as recorded: see the module."""

    NVMLError = NVMLError

    def __init__(self, recording: dict):
        self._calls = recording["calls"]
        self._constants = {k: tuple(v) if isinstance(v, list) else v for k, v in recording["constants"].items()}
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()

    def __getattr__(self, name):
        if name in self._constants:
            return self._constants[name]
        if name.startswith("nvml"):
            return lambda *args: self._answer(call_key(name, list(args)))
        raise AttributeError(name)

    def _answer(self, key):
        if key not in self._calls:
            raise AssertionError(f"NVML was not asked {key} when this was recorded")
        with self._lock:
            answers = self._calls[key]
            i = self._next.get(key, 0)
            self._next[key] = i + 1
        answer = answers[min(i, len(answers) - 1)]
        if isinstance(answer, dict) and "error" in answer:
            raise NVMLError(answer["error"], answer["message"])
        return _decode(answer)


class _Struct:
    def __init__(self, fields: dict):
        self.__dict__.update({k: _decode(v) for k, v in fields.items()})


def _decode(value):
    if isinstance(value, dict):
        if "handle" in value:
            return value["handle"]  # handles are opaque: its label stands in for it
        if "bytes" in value:
            return value["bytes"].encode("latin-1")
        if "struct" in value:
            return _Struct(value["struct"])
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def recordings() -> list[Path]:
    return sorted(RECORDINGS.glob("*.json"))
