"""Which preset describes a device, from the numbers a trace's `deviceProperties` records.

Names vary ('A100-PG509-200', '' on some ROCm traces), so the numbers decide: SM/CU count,
compute capability and memory size must agree with a preset wherever both state them.
A model module: imports only profiler.model.hardware.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from profiler.model.hardware import HardwareSpec, _preset, preset_match, presets


def _numbers_fit(m: Mapping, sm_count: int, cc: str, memory_bytes: int) -> tuple[bool, int]:
    """(consistent, how many of the given numbers the preset pins down)."""
    pinned = 0
    if sm_count and m.get("sm_count"):
        allowed = m["sm_count"] if isinstance(m["sm_count"], (list, tuple)) else [m["sm_count"]]
        if int(sm_count) not in {int(x) for x in allowed}:
            return False, 0
        pinned += 1
    if cc and m.get("compute_capability"):
        allowed = m["compute_capability"]
        allowed = allowed if isinstance(allowed, (list, tuple)) else [allowed]
        if str(cc).strip() not in {str(x) for x in allowed}:
            return False, 0
        pinned += 1
    if memory_bytes and m.get("memory_bytes") is not None:
        rng = m["memory_bytes"]
        lo, hi = (float(rng[0]), float(rng[1])) if isinstance(rng, (list, tuple)) else (float(rng), float(rng))
        if not lo <= memory_bytes <= hi:
            return False, 0
        pinned += 1
    return True, pinned


def match_device(name: str, sm_count: int, compute_capability: str, memory_bytes: int) -> HardwareSpec | None:
    """The preset for a device as a trace's `deviceProperties` describes it, or None.

    `sm_count` is SMs (NVIDIA) or CUs (AMD); `compute_capability` is 'major.minor' (ROCm
    reports gfx90a as 9.0, gfx942 as 9.4); `memory_bytes` is totalGlobalMem. Zero / '' mean
    unknown. The numbers decide (names vary: 'A100-PG509-200', '' on some ROCm traces): a preset
    qualifies when every number it pins down and the trace gives agrees, at least one does, and
    the name hits none of its `exclude` regexes. Among those, presets whose `names` regexes match
    the name win, then the one pinning down the most numbers; a tie is ambiguous and gives None.
    With no numbers at all the name alone decides, if exactly one preset's regexes match it.
    """
    name = name or ""
    scored = []
    for p in presets():
        m = preset_match(p)  # the match block alone; only the winner is loaded whole
        if not m:
            continue
        if any(re.search(rx, name, re.IGNORECASE) for rx in m.get("exclude") or ()):
            continue
        ok, pinned = _numbers_fit(m, sm_count, compute_capability, memory_bytes)
        named = bool(name) and any(re.search(rx, name, re.IGNORECASE) for rx in m.get("names") or ())
        if not ok or (pinned == 0 and not named):
            continue
        scored.append((named, pinned, p))
    if not scored:
        return None
    scored.sort(key=lambda t: (t[0], t[1]), reverse=True)
    best = scored[0]
    if len(scored) > 1 and (scored[1][0], scored[1][1]) == (best[0], best[1]):
        return None
    return _preset(best[2])


def match_note(name: str, sm_count: int, compute_capability: str, memory_bytes: int) -> tuple[HardwareSpec | None, str]:
    """`match_device`, with a one-line note when the match is not by the device's own name: which
    preset stands in and why (its numbers agree but its name patterns do not), or that none fits
    and `--hardware` is needed. '' when the preset matched the device by name."""
    spec = match_device(name, sm_count, compute_capability, memory_bytes)
    what = f"device {name!r}" if name else "a device with no name"
    numbers = f"{sm_count} SMs/CUs, compute capability {compute_capability or '?'}, {memory_bytes / 1e9:.1f} GB"
    if spec is None:
        return None, (
            f"{what} ({numbers}) matches no preset: its units have no floors; pass --hardware PRESET "
            "or a spec file (perf calibrate writes one)"
        )
    named = bool(name) and any(re.search(rx, name, re.IGNORECASE) for rx in spec.match.get("names") or ())
    if named:
        return spec, ""
    return spec, (
        f"{what} is floored as {spec.name}: no preset is named for it, and {spec.name}'s numbers agree "
        f"({numbers}); pass --hardware if that is not this device"
    )


def match_properties(props: Mapping[str, Any]) -> HardwareSpec | None:
    """`match_device` on one entry of a Kineto trace's top-level `deviceProperties` list."""
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    cc = f"{major}.{minor}" if major is not None and minor is not None else ""
    return match_device(
        str(props.get("name") or ""),
        int(props.get("numSms") or 0),
        cc,
        int(props.get("totalGlobalMem") or 0),
    )
