"""Cost model basics: the `Cost` value, dtype tables and the recorded-argument accessor.

Shared by the formula modules (`compute`, `memory`, `custom`, `joins`); the entry points and the
conventions are in `analysis.cost`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from profiler.model.dtypes import ELEMENT_BYTES, KINETO
from profiler.model.dtypes import SCALAR_TYPES as SCALAR_TYPES  # re-exported to the formulas

FAMILIES = (
    "gemm",
    "attention",
    "conv",
    "norm",
    "elementwise",
    "reduction",
    "softmax",
    "quant/cast",
    "copy",
    "embedding",
    "optimizer",
    "collective",
    "other",
)


@dataclass(frozen=True)
class Cost:
    """FLOPs and bytes of one op (or of several, summed). ``flops_effective`` applies causal
    masks (attention).

    A value that adds, like tinygrad's `Estimates`: ``a + b`` is the cost of doing both (FLOPs
    and bytes add; family and dtype are those of the term with more effective FLOPs, the one
    whose peak bounds the compute floor; ties keep the left), ``c * k`` the cost of doing it k
    times, and ``Cost.ZERO`` is the empty sum (``sum(costs, Cost.ZERO)``).
    """

    flops: float
    flops_effective: float
    bytes_read: float
    bytes_written: float
    family: str
    dtype: str
    ZERO: ClassVar[Cost]

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    @classmethod
    def of(cls, flops, read, written, family, dtype, effective=None) -> Cost:
        """A cost from a formula's numbers (any numeric type); `effective` defaults to `flops`."""
        return cls(
            float(flops), float(flops if effective is None else effective), float(read), float(written), family, dtype
        )

    def __add__(self, other: Cost) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        if other is Cost.ZERO:
            return self
        if self is Cost.ZERO:
            return other
        lead = other if other.flops_effective > self.flops_effective else self
        return Cost(
            self.flops + other.flops,
            self.flops_effective + other.flops_effective,
            self.bytes_read + other.bytes_read,
            self.bytes_written + other.bytes_written,
            lead.family,
            lead.dtype,
        )

    def __mul__(self, k: float) -> Cost:
        if isinstance(k, bool) or not isinstance(k, (int, float)):
            return NotImplemented
        return Cost(
            self.flops * k,
            self.flops_effective * k,
            self.bytes_read * k,
            self.bytes_written * k,
            self.family,
            self.dtype,
        )

    __rmul__ = __mul__


#: The empty sum: adding it changes nothing (family and dtype included).
Cost.ZERO = Cost(0.0, 0.0, 0.0, 0.0, "other", "unknown")


# Kineto "Input type" -> (normalised dtype, bytes per element), and our names too (for
# list_dtype and callers that already normalised): the model's one dtype table.
DTYPES: dict[str, tuple[str, int]] = {k: (v, ELEMENT_BYTES[v]) for k, v in KINETO.items()}
DTYPES.update({n: (n, b) for n, b in ELEMENT_BYTES.items()})
# Argument kinds that are not tensors (older Kineto writes 'Int', 'Bool', 'GenericList', ...).
_NOT_TENSOR = {
    "",
    "Scalar",
    "ScalarList",
    "TensorList",
    "GenericList",
    "None",
    "Int",
    "Bool",
    "Double",
    "Float",
    "Long",
    "String",
    "Device",
    "Layout",
    "ScalarType",
    "MemoryFormat",
    "Generator",
    "Storage",
    "Stream",
    "Tuple",
    "Dict",
    "Object",
}


class Unknown(Exception):
    """Raised inside a formula when the record lacks what the formula needs."""


def parse_concrete(text: Any) -> Any:
    """One Concrete Inputs string -> int, float, bool, list or str; None when empty."""
    if text is None or text == "":
        return None
    if not isinstance(text, str):
        return text
    if text in ("True", "False"):
        return text == "True"
    try:
        return orjson.loads(text)  # ints, '[1, 1]', '1e-05'
    except orjson.JSONDecodeError:
        pass
    if text.startswith("["):  # '[True, True, False]' (output_mask)
        try:
            return orjson.loads(text.replace("True", "true").replace("False", "false"))
        except orjson.JSONDecodeError:
            return text
    try:
        return float(text)  # '0.' (C++ float formatting)
    except ValueError:
        return text  # a string argument, e.g. padding='same'


def numel(shape: list[int]) -> int:
    return math.prod(shape)


class Args:
    """The recorded arguments of one op, with typed accessors that raise _Unknown."""

    def __init__(self, shapes, dtypes, concrete, list_dtype):
        self.shapes = shapes
        self.dtypes = dtypes
        self.concrete = concrete
        self.list_dtype = list_dtype

    def is_tensor(self, i: int) -> bool:
        return (
            i < len(self.shapes)
            and i < len(self.dtypes)
            and isinstance(self.dtypes[i], str)
            and self.dtypes[i] not in _NOT_TENSOR
        )

    def shape(self, i: int) -> list[int]:
        if not self.is_tensor(i):
            raise Unknown
        return list(self.shapes[i])

    def size(self, i: int) -> int:
        """Bytes per element of tensor argument i."""
        if not self.is_tensor(i) or self.dtypes[i] not in DTYPES:
            raise Unknown
        return DTYPES[self.dtypes[i]][1]

    def dtype(self, i: int) -> str:
        if not self.is_tensor(i) or self.dtypes[i] not in DTYPES:
            raise Unknown
        return DTYPES[self.dtypes[i]][0]

    def nbytes(self, i: int) -> int:
        """Bytes of tensor argument i; 0 when it is absent (None, an optional bias)."""
        if not self.is_tensor(i):
            return 0
        return numel(self.shape(i)) * self.size(i)

    def tensors(self) -> list[int]:
        return [i for i in range(len(self.shapes)) if self.is_tensor(i)]

    def value(self, i: int, default: Any = Unknown) -> Any:
        """Concrete value of argument i; `default` when unrecorded (raises without one)."""
        v = None
        if self.concrete is not None and i < len(self.concrete):
            v = parse_concrete(self.concrete[i])
        if v is None:
            if default is Unknown:
                raise Unknown
            return default
        return v

    def tensor_list(self, i: int) -> list[list[int]]:
        """Shapes of a TensorList argument ([] when the list is empty)."""
        if i >= len(self.shapes) or i >= len(self.dtypes) or self.dtypes[i] != "TensorList":
            raise Unknown
        s = self.shapes[i]
        return [list(x) for x in s] if s and isinstance(s[0], list) else []

    def list_size(self) -> int:
        if self.list_dtype not in DTYPES:
            raise Unknown
        return DTYPES[self.list_dtype][1]


def broadcast(*shapes: list[int]) -> list[int]:
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(nd):
        dims = {s[len(s) - nd + d] for s in shapes if len(s) - nd + d >= 0} - {1}
        if len(dims) > 1:
            raise Unknown
        out.append(dims.pop() if dims else 1)
    return out
