"""Element types: one table of every dtype spelling the readers meet, our names, and their sizes.

Our names are what the cost model, the hardware specs and every output use ('fp32', 'bf16',
...). Spellings come from: Kineto's 'Input type' ('float', 'c10::BFloat16', 'long int'), torch
('torch.bfloat16', 'float16'), the FX graphs Inductor prints ('bf16[8, 64]', 'f32', 'i64'), and
collective records ('Float', 'BFloat16'). Sizes are the C++ types' (c10/core/ScalarType.h).
"""

from __future__ import annotations

#: Our dtype names -> bytes per element.
ELEMENT_BYTES: dict[str, int] = {
    "fp64": 8,
    "fp32": 4,
    "tf32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
}

#: Kineto's 'Input type' spellings (exact, as recorded) -> our name.
KINETO: dict[str, str] = {
    "float": "fp32",
    "double": "fp64",
    "c10::Half": "fp16",
    "c10::BFloat16": "bf16",
    "long int": "int64",
    "int": "int32",
    "short int": "int16",
    "signed char": "int8",
    "unsigned char": "int8",
    "bool": "bool",
    "c10::qint8": "int8",
    "c10::quint8": "int8",
    "c10::qint32": "int32",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
    "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8",
}

#: c10::ScalarType enum values (as Concrete Inputs records a `dtype` argument) -> Kineto's spelling.
SCALAR_TYPES: dict[int, str] = {
    0: "unsigned char",
    1: "signed char",
    2: "short int",
    3: "int",
    4: "long int",
    5: "c10::Half",
    6: "float",
    7: "double",
    11: "bool",
    12: "c10::qint8",
    13: "c10::quint8",
    14: "c10::qint32",
    15: "c10::BFloat16",
    23: "c10::Float8_e5m2",
    24: "c10::Float8_e4m3fn",
    25: "c10::Float8_e5m2fnuz",
    26: "c10::Float8_e4m3fnuz",
}

#: FX's dtype abbreviations (torch._subclasses: 'f32[8, 64]') -> our name.
FX: dict[str, str] = {
    "f64": "fp64",
    "f32": "fp32",
    "f16": "fp16",
    "bf16": "bf16",
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "u8": "int8",
    "b8": "bool",
    "c64": "complex64",
    "c128": "complex128",
    "f8e4m3fn": "fp8",
    "f8e5m2": "fp8",
    "f8e4m3fnuz": "fp8",
    "f8e5m2fnuz": "fp8",
}

# Other spellings, lower case (torch's names without 'torch.', collective records lowered).
_OTHER: dict[str, str] = {
    "float64": "fp64",
    "float32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "tensorfloat32": "tf32",
    "long": "int64",
    "int64": "int64",
    "int32": "int32",
    "int16": "int16",
    "short": "int16",
    "int8": "int8",
    "uint8": "int8",
    "byte": "int8",
    "char": "int8",
    "complex64": "complex64",
    "complex128": "complex128",
}
_LOWER: dict[str, str] = {**{k.lower(): v for k, v in KINETO.items()}, **FX, **_OTHER, **{n: n for n in ELEMENT_BYTES}}


def dtype_name(spelling: object) -> str | None:
    """Our name for any spelling above ('c10::BFloat16', 'torch.float16', 'f32', 'Float',
    'float8_e4m3fn'); None if unknown."""
    s = str(spelling).strip()
    if s in KINETO:
        return KINETO[s]
    d = s.lower().removeprefix("torch.")
    if d in _LOWER:
        return _LOWER[d]
    if d.startswith(("float8", "fp8", "c10::float8")):
        return "fp8"
    return None


def element_bytes(spelling: object) -> int | None:
    """Bytes per element of any spelling `dtype_name` knows; None if unknown."""
    name = dtype_name(spelling)
    return ELEMENT_BYTES.get(name) if name else None
