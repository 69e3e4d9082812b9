"""Per-layer numerical comparison of a candidate (exported, quantized, another backend) against
the reference (eager fp32), and the first layer where the error jumps past a threshold.

Per layer, with r the reference output and c the candidate's (both fp32, flattened):

    rel_error     = ||c - r||_2 / ||r||_2          (normwise relative error; inf when r = 0 and c != r)
    max_abs_error = max |c - r|
    cosine        = <c, r> / (||c|| ||r||)          (1 when both are zero)
    sqnr_db       = 10 log10(||r||^2 / ||c - r||^2) = -20 log10(rel_error)   (inf when c = r)

`first_diverging` is the first layer in network order whose rel_error exceeds the threshold
(default 0.1: the error is a tenth of the signal, SQNR below 20 dB). `growth` ranks the layers by
how much their error grew over the layer before them (rel_error ratio).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

DEFAULT_THRESHOLD = 0.1


@dataclass(frozen=True)
class LayerError:
    """One layer's comparison: module path, op (module class), and the four measures above."""

    name: str
    op: str
    rel_error: float
    max_abs_error: float
    cosine: float
    sqnr_db: float


@dataclass(frozen=True)
class NumericsReport:
    """Layers in network order, the first whose rel_error > threshold (or None), the output's error,
    the layers whose error grew most (name, ratio over the previous layer), and notes (calibration)."""

    layers: tuple[LayerError, ...]
    first_diverging: LayerError | None
    output: LayerError
    threshold: float
    growth: tuple[tuple[str, float], ...]
    reference: str
    candidate: str
    notes: tuple[str, ...] = ()
    #: the user's task metric on the model outputs (`--metric MODULE:FN`): (its name, its value)
    metric: tuple[str, float] | None = None


def layer_error(name: str, op: str, ref: np.ndarray, cand: np.ndarray) -> LayerError:
    """The four measures of one layer (see the module docstring)."""
    r = np.asarray(ref, dtype=np.float64).ravel()
    c = np.asarray(cand, dtype=np.float64).ravel()
    d = c - r
    nr, nc, nd = float(np.linalg.norm(r)), float(np.linalg.norm(c)), float(np.linalg.norm(d))
    rel = nd / nr if nr > 0 else (0.0 if nd == 0 else math.inf)
    cos = float(np.dot(c, r)) / (nc * nr) if nc > 0 and nr > 0 else (1.0 if nc == nr == 0 else 0.0)
    sqnr = math.inf if nd == 0 else (20 * math.log10(nr / nd) if nr > 0 else -math.inf)
    return LayerError(name, op, rel, float(np.abs(d).max()) if d.size else 0.0, cos, sqnr)


def compare_layers(
    ref: dict[str, np.ndarray],
    cand: dict[str, np.ndarray],
    ops: dict[str, str],
    ref_out: np.ndarray,
    cand_out: np.ndarray,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    reference: str = "eager:fp32",
    candidate: str = "",
    notes: tuple[str, ...] = (),
    top_growth: int = 3,
    metric: tuple[str, Callable[[np.ndarray, np.ndarray], float]] | None = None,
) -> NumericsReport:
    """Compare the layers both sides have (in `ref`'s order, the network order) whose shapes agree;
    `metric` (name, fn(reference output, candidate output) -> float) is evaluated on the outputs."""
    layers = tuple(
        layer_error(name, ops.get(name, ""), r, cand[name])
        for name, r in ref.items()
        if name in cand and cand[name].size == r.size
    )
    first = next((x for x in layers if x.rel_error > threshold), None)
    growth = []
    for prev, cur in zip(layers, layers[1:]):
        if cur.rel_error > 0:
            ratio = cur.rel_error / prev.rel_error if prev.rel_error > 0 else math.inf
            growth.append((cur.name, ratio))
    growth.sort(key=lambda g: -g[1])
    out = layer_error("output", "", ref_out, cand_out)
    value = (metric[0], float(metric[1](ref_out, cand_out))) if metric else None
    return NumericsReport(layers, first, out, threshold, tuple(growth[:top_growth]), reference, candidate, notes, value)
