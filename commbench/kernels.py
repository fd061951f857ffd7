"""Reducers: the arithmetic commbench's own algorithms apply to received data.

One Reducer per buffer kind (numpy arrays for MPI, torch tensors for gloo); the GPU path adds
one over CUDA kernels with the same three methods. All work in place on `dst`.
"""

from __future__ import annotations

import numpy as np


class NumpyReducer:
    _UFUNCS = {"sum": np.add, "avg": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}

    def reduce(self, dst, src, op: str, other=None) -> None:
        """dst = op(other, src) element-wise, other defaulting to dst (avg accumulates a sum;
        see finish). `other` lets an out-of-place algorithm read its input without a copy."""
        self._UFUNCS[op](dst if other is None else other, src, out=dst)

    def copy(self, dst, src) -> None:
        dst[...] = src

    def finish(self, dst, op: str, world: int) -> None:
        """Turn an accumulated sum into the average."""
        if op == "avg":
            np.divide(dst, world, out=dst)


class TorchReducer:
    def __init__(self):
        import torch  # only where a torch backend runs

        self._fns = {"sum": torch.add, "avg": torch.add, "prod": torch.mul, "min": torch.minimum,
                     "max": torch.maximum}

    def reduce(self, dst, src, op: str, other=None) -> None:
        self._fns[op](dst if other is None else other, src, out=dst)

    def copy(self, dst, src) -> None:
        dst.copy_(src)

    def finish(self, dst, op: str, world: int) -> None:
        if op == "avg":
            dst.div_(world)
