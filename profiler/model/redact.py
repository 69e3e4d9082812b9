"""Scrub secrets out of profiler traces before anything is shown or written.

PyTorch/Kineto traces carry free-form metadata: environment variables,
command lines, file paths, URLs, user annotations.  Traces collected in the
wild have been seen to hold live access tokens, so every string this tool
displays or writes must pass through this module first.

Public API:

* :data:`REDACTED` - the marker that replaces a secret.
* :func:`redact_text` - replace token-shaped substrings inside one string.
* :func:`is_secret_key` - does a key/variable/flag name denote a secret?
* :func:`redact` - deep-copy a JSON-like value with secrets replaced.

Layout: the free-text scanner (`redact_text`, `might_hold_secret`) is
:mod:`profiler.model.redact_scan`; this module walks structured values.

Design notes:

* Pure and stdlib-only so that it can be imported from anywhere (including
  the CLI's output layer) without import cycles.
* Cheap first: a handful of plain substring checks rejects almost every
  trace string (kernel and op names) before any regex runs; the rest get a
  left-to-right scan with a single precompiled alternation that collects
  the spans to hide (repeated until nothing changes; one extra pass only
  when something was hidden).  Short results are memoised, since traces
  repeat names endlessly; the memo is invisible to callers.
* Shapes are anchored on distinctive prefixes (``hf_``, ``ghp_``, ``eyJ``,
  ``AKIA``...) or on a secret-ish key name, never on "long random-looking
  string" alone: C++ template kernel names, hex addresses and 40-hex git
  hashes are long and random-looking too, and must survive unchanged.
* When in doubt about a *key*, redact (a lost value is cheap, a leaked token
  is not); when in doubt about *free text*, leave it (kernel names are the
  tool's whole point).
* Output is idempotent: ``redact_text(redact_text(s)) == redact_text(s)``.
"""

from __future__ import annotations

from typing import Any

from profiler.model.redact_marker import REDACTED
from profiler.model.redact_scan import _scan as _scan  # tests reach the scanner without the memo
from profiler.model.redact_scan import might_hold_secret, redact_text
from profiler.model.secret_keys import is_secret_key

__all__ = ["REDACTED", "is_secret_key", "might_hold_secret", "redact", "redact_text"]


# --------------------------------------------------------------------------
# Structured values
# --------------------------------------------------------------------------


_SCALARS = frozenset({int, float, bool, type(None)})


def _is_blank(value: Any) -> bool:
    """None and empty containers/strings: nothing there to hide."""
    return value is None or (isinstance(value, (str, list, tuple, dict)) and len(value) == 0)


def _redact_items(items: list[Any] | tuple[Any, ...]) -> list[Any]:
    """Redact the items of a list/tuple, reading it as an argv as well.

    ``["train.py", "--api-key", "abc"]`` is how metadata records a command
    line, so the item after a secret-named flag (without ``=``) is hidden,
    unless it is itself a flag.
    """
    out = []
    hide_next = False
    for v in items:
        vt = type(v)
        if vt is str:
            if hide_next and v and not v.startswith("-"):
                out.append(REDACTED)
                hide_next = False
                continue
            # a flag is one token: '-Passwd <redacted>' (a redacted '-Passwd x=') is not one
            hide_next = v.startswith("-") and "=" not in v and not any(c.isspace() for c in v) and is_secret_key(v)
            out.append(redact_text(v))
        else:
            hide_next = False
            out.append(v if vt in _SCALARS else redact(v))
    return out


def _free_key(out: dict[Any, Any], key: str) -> str:
    """`key`, or `key (2)`, `key (3)`... if taken: two keys redacted alike both keep their values."""
    if key not in out:
        return key
    n = 2
    while f"{key} ({n})" in out:
        n += 1
    return f"{key} ({n})"


def redact(obj: Any) -> Any:
    """Return a redacted deep copy of a JSON-like value; never mutates ``obj``.

    * A dict value whose key satisfies :func:`is_secret_key` becomes
      :data:`REDACTED` whatever its type (numbers, bools, nested dicts
      included), unless it is None or empty.
    * Every other string, at any depth (dict values, list/tuple items), goes
      through :func:`redact_text`, and so do string dict keys (a token used as
      a key is still a token); two keys that redact alike both stay, the
      second as ``"<redacted> (2)"``.
    * In a list or tuple, the item after a secret-named flag (``"--api-key"``,
      no ``=``) is hidden too: that is how argv lists record a command line.
    * Lists stay lists, tuples stay tuples; dict subclasses become ``dict``.
    * Scalars (int, float, bool, None) and unknown types are returned as is:
      they are immutable or opaque, and copying them gains nothing.
    """
    # Type dispatch with the scalar cases inlined: a trace is hundreds of
    # thousands of small dicts of numbers, so call overhead dominates.
    t = type(obj)
    if t is str:
        return redact_text(obj)
    if t in _SCALARS:
        return obj
    if isinstance(obj, dict):
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            vt = type(v)
            key = _free_key(out, redact_text(k)) if type(k) is str else k
            if type(k) is str and is_secret_key(k) and not _is_blank(v):
                out[key] = REDACTED
            elif vt is str:
                out[key] = redact_text(v)
            elif vt in _SCALARS:
                out[key] = v
            else:
                out[key] = redact(v)
        return out
    if isinstance(obj, list):
        return _redact_items(obj)
    if isinstance(obj, tuple):
        return tuple(_redact_items(obj))
    if isinstance(obj, str):  # str subclasses
        return redact_text(obj)
    return obj
