"""The element types commbench sweeps, and what each can represent exactly.

`exact_limit` is the largest integer that the type holds exactly together with every smaller
non-negative integer (2**(mantissa bits + 1) for floats): data patterns stay below it, so that
every reduction result is exact in any summation order and checks can be bit-exact.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str
    itemsize: int
    is_float: bool
    signed: bool
    exact_limit: int
    numpy_name: str | None  # None: numpy has no such type (bfloat16)
    torch_name: str
    mantissa_bits: int = 0  # floats: explicit mantissa bits, for the avg tolerance

    @property
    def sentinel(self) -> int:
        """A value no data pattern produces: output buffers start as this before a check."""
        return 255 if self.name == "uint8" else -7


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float32", 4, True, True, 2**24, "float32", "float32", 23),
        DType("float64", 8, True, True, 2**53, "float64", "float64", 52),
        DType("float16", 2, True, True, 2**11, "float16", "float16", 10),
        DType("bfloat16", 2, True, True, 2**8, None, "bfloat16", 7),
        DType("int32", 4, False, True, 2**31 - 1, "int32", "int32"),
        DType("int64", 8, False, True, 2**63 - 1, "int64", "int64"),
        DType("int8", 1, False, True, 127, "int8", "int8"),
        # 255 is the sentinel, so patterns stop at 254
        DType("uint8", 1, False, False, 254, "uint8", "uint8"),
    )
}

OPS = ("sum", "prod", "min", "max", "avg")

# other tools' names for the types above (nccl-tests' -d, C and MPI spellings), accepted wherever a
# dtype is given (commbench.spec.resolve_names) and mapped to commbench's name
DTYPE_ALIASES: dict[str, str] = {
    "float": "float32", "fp32": "float32", "f32": "float32",
    "double": "float64", "fp64": "float64", "f64": "float64",
    "half": "float16", "fp16": "float16", "f16": "float16",
    "bf16": "bfloat16",
    "int": "int32", "long": "int64",
    "char": "int8",
}
