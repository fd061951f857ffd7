"""Small workload documents for the workload tests, overridable field by field."""

from __future__ import annotations

import copy

from commbench.workload.config import parse_workload


def doc(**sections) -> dict:
    """A valid workload document: 1M parameters, fp32, DDP on 4 ranks of one node, one micro-batch
    per step; each keyword replaces (a dict: updates) one section."""
    base = {
        "name": "small",
        "model": {"params": 1_000_000},
        "dtypes": {"params": "fp32", "grads": "fp32"},
        "batch": {"global": 4, "micro": 1},
        "parallel": {"world": 4, "gpus_per_node": 4, "dp_mode": "ddp"},
    }
    out = copy.deepcopy(base)
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and not value.pop("_replace", False):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def config(**sections):
    return parse_workload(doc(**sections), where="test")


# a tiny transformer: every figure below is computable by hand
TINY = {"layers": 2, "hidden": 8, "ffn": 32, "heads": 2, "seq": 4, "vocab": 16, "_replace": True}


def tiny(**sections):
    sections.setdefault("model", dict(TINY))
    return config(**sections)
