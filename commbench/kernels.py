"""Reducers: the arithmetic commbench's own algorithms apply to received data.

One Reducer per buffer kind (numpy arrays for MPI, torch tensors for gloo); the GPU path adds
one over CUDA kernels with the same three methods. All work in place on `dst`.
"""

from __future__ import annotations

import numpy as np


class NumpyReducer:
    _UFUNCS = {"sum": np.add, "avg": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}

    def reduce(self, dst, src, op: str) -> None:
        """dst = op(dst, src), element-wise (avg accumulates a sum; see finish)."""
        self._UFUNCS[op](dst, src, out=dst)

    def copy(self, dst, src) -> None:
        dst[...] = src

    def finish(self, dst, op: str, world: int) -> None:
        """Turn an accumulated sum into the average."""
        if op == "avg":
            np.divide(dst, world, out=dst)


class TorchReducer:
    def __init__(self):
        import torch  # only where a torch backend runs

        self._minimum, self._maximum = torch.minimum, torch.maximum

    def reduce(self, dst, src, op: str) -> None:
        if op in ("sum", "avg"):
            dst.add_(src)
        elif op == "prod":
            dst.mul_(src)
        elif op == "min":
            self._minimum(dst, src, out=dst)
        elif op == "max":
            self._maximum(dst, src, out=dst)
        else:
            raise ValueError(f"unknown op {op!r}")

    def copy(self, dst, src) -> None:
        dst.copy_(src)

    def finish(self, dst, op: str, world: int) -> None:
        if op == "avg":
            dst.div_(world)
