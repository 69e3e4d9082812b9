"""Secrets in free text: `redact_text` finds token-shaped substrings and secret-named
assignments in one string and hides them (the design notes are in profiler.model.redact, which
re-exports this module's public names)."""

from __future__ import annotations

import re

from profiler.model.redact_marker import REDACTED
from profiler.model.secret_keys import is_secret_key
from profiler.model.secret_patterns import DQ, LIT_REDACTED, PATTERN, REST_OF_LINE, SQ, UNQ_VALUE

__all__ = ["might_hold_secret", "redact_text"]


# (start, end) index ranges of a string to replace by REDACTED.
_Spans = list[tuple[int, int]]

_CPP_WINDOW = 4096


def _in_cpp_with_clause(m: re.Match[str], sep: str) -> bool:
    """True if the match is a ``Key = int`` inside a C++ ``[with ...]`` clause.

    GCC-style demangled names spell template arguments that way; those are
    types, not secrets.  Demanding GCC's exact " = " and a clause that is
    open before and closed after keeps env dumps from hiding behind it.
    """
    if sep != " = ":
        return False
    text = m.string
    # Bounded windows keep a long "token = x token = x ..." line linear.
    lo, hi = max(0, m.start() - _CPP_WINDOW), m.end() + _CPP_WINDOW
    opened = text.rfind("[with ", lo, m.start())
    return opened != -1 and text.find("]", opened, m.start()) == -1 and text.find("]", m.end(), hi) != -1


# A Python name as a keyword argument's value: letters, '_' and '.', no digits (a credential
# almost always has some), then the end of the argument.
_NAME_ARG = re.compile(r"[A-Za-z_][A-Za-z_.]{0,63}[ \t]*(?=[,)])", re.ASCII)


def _is_code_kwarg(m: re.Match[str], key: str, val_start: int) -> bool:
    """True for ``f(key=k)`` / ``update(x, key=k, value=v)``: a call's argument named plain
    "key" whose value is a Python name. That is code (a KV-cache update, a sort key), not a
    credential; a qualified name (``api_key=``) or a value with digits is still hidden."""
    if key.lower() not in ("key", "keys"):
        return False
    before = m.string[max(0, m.start() - 64) : m.start()].rstrip(" \t")
    return before.endswith(("(", ",")) and _NAME_ARG.match(m.string, val_start) is not None


def _value_span(text: str, start: int, end: int) -> _Spans:
    """The part of ``text[start:end]`` (a matched value) to hide, quotes kept."""
    val = text[start:end]
    if val in ("", "null", "None"):
        return []  # mirrors redact(): an absent value reveals nothing
    for q in ('\\"', '"', "'"):
        n = len(q)
        if len(val) >= 2 * n and val.startswith(q) and val.endswith(q):
            return [(start + n, end - n)] if len(val) > 2 * n else []
    return [(start, end)]


# Key and value group of each key/value form; forms whose value the regex
# leaves unread have a value pattern in _VALUE_RE instead.
_PAIR_GROUPS = {
    "qp": ("qp_key", None),
    "jkv": ("jkv_key", "jkv_val"),
    "cli": ("cli_key", "cli_val"),
    "eq": ("kv_key", None),
    "col": ("kv_key", None),
    "ws": ("kv_key", "ws_val"),
}
_VALUE_RE = {
    # A query value stops at '&' so the next parameter survives.
    "qp": re.compile(rf"""{LIT_REDACTED}|[^&#\s"'<]+""", re.ASCII),
    "eq": re.compile(rf"{LIT_REDACTED}|{DQ}|{SQ}|{UNQ_VALUE}", re.ASCII),
    "col": re.compile(rf"{LIT_REDACTED}|{DQ}|{SQ}|{REST_OF_LINE}", re.ASCII),
}

_RESCAN_MAX = 256


def _pair_spans(m: re.Match[str], kind: str) -> tuple[_Spans, int]:
    """Spans to hide for a key/value match: see :func:`_match_spans`."""
    if kind == "kv":
        kind = "eq" if m.group("eq_sep") is not None else ("col" if m.group("col_sep") is not None else "ws")
    key_g, val_g = _PAIR_GROUPS[kind]
    text = m.string
    val_start = m.end() if val_g is None else m.start(val_g)
    # A quoted key is not rescanned, and could itself be token-shaped.
    spans = [(m.start(key_g) + a, m.start(key_g) + b) for a, b in _spans(m.group(key_g))] if kind == "jkv" else []
    if not is_secret_key(m.group(key_g)) or (
        kind == "eq" and (_in_cpp_with_clause(m, m.group("eq_sep")) or _is_code_kwarg(m, m.group(key_g), val_start))
    ):
        # Leave the value unread and scan on from its start: it may hold a
        # token, a URL password or another pair.  Not reading it keeps
        # "a: b: c: ..." linear.
        return spans, val_start
    if val_g is not None:
        val_end = m.end(val_g)
    else:
        vm = _VALUE_RE[kind].match(text, val_start)
        if vm is None:
            return spans, val_start
        val_end = vm.end()
    spans += _value_span(text, val_start, val_end)
    # A short value is scanned again, because a pattern may begin inside it
    # and run past its end (an AWS key id whose secret follows a comma).  A
    # long one is skipped: rescanning every "token: token: ..." value would
    # be quadratic.
    return spans, val_start if val_end - val_start <= _RESCAN_MAX else val_end


def _match_spans(m: re.Match[str]) -> tuple[_Spans, int]:
    """What one match of :data:`PATTERN` hides, and where scanning resumes.

    Returns the ``(start, end)`` spans of ``m.string`` to replace by
    :data:`REDACTED` and the index at which to continue the search, which
    is always past ``m.start()``.
    """
    kind = m.lastgroup
    if kind == "pem":
        return [(m.end("pem_begin"), m.start("pem_end"))], m.end()
    if kind == "url":
        return [(m.end("url_head"), m.end())], m.end()
    if kind == "aws":
        spans = [(m.start(), m.start("aws_sep") if m.group("aws_sep") is not None else m.end())]
        if m.group("aws_secret") is not None:
            spans.append((m.start("aws_secret"), m.end()))
        return spans, m.end()
    if kind == "bearer":
        return [(m.end("bearer_head"), m.end())], m.end()
    if kind == "tok":
        return [(m.start(), m.end())], m.end()  # the whole token is the secret
    return _pair_spans(m, kind)


def _spans(s: str) -> _Spans:
    """All spans of ``s`` to hide, in match order (may overlap)."""
    spans: _Spans = []
    m = PATTERN.search(s)
    while m is not None:
        found, resume = _match_spans(m)
        spans += found
        # Look-behinds still see s[:resume], so context is never lost.
        m = PATTERN.search(s, resume)
    return spans


# Lower-case substrings at least one of which is in every string that
# PATTERN would change: the secret-key trigger words, the token prefixes,
# "://" for URLs and "private" for PEM blocks.
# Plain `in` scans run at memory speed, an order of magnitude faster than
# the alternation, and almost every trace string fails all of them.
_MARKERS = (
    "key",
    "token",
    "auth",
    "session",
    "pass",
    "pwd",
    "sig",
    "secret",
    "credential",
    "cookie",
    "private",
    "dsn",
    "webhook",
    "jwt",
    "bearer",
    "://",
    "akia",
    "asia",
    "abia",
    "acca",
    "hf_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "eyj",
    "sk-",
    "sk_",
    "rk_",
    "xox",
    "xapp-",
    "aiza",
)


def might_hold_secret(s: str) -> bool:
    """Cheap pre-check: False guarantees that redact_text() would return ``s``, and that no
    key named in ``s`` is secret (every :func:`is_secret_key` word holds one of these markers)."""
    low = s.lower()
    for marker in _MARKERS:  # a plain loop beats any() + generator here
        if marker in low:
            return True
    return False


# Traces repeat the same few thousand names across hundreds of thousands of
# events, so short results are memoised.  Bounded in entries and in string
# length (call stacks can be kilobytes), and dropped wholesale when full:
# simpler than LRU and the working set refills in one pass.
_CACHE: dict[str, str] = {}
_CACHE_MAX_ENTRIES = 1 << 15
_CACHE_MAX_LEN = 256
# Passes are bounded in case two patterns ever feed each other; in practice
# the second pass finds nothing new.
_MAX_PASSES = 4


def redact_text(s: str) -> str:
    """Return ``s`` with every token-shaped substring replaced by :data:`REDACTED`.

    Recognised: Hugging Face (``hf_...``), GitHub (``ghp_``/``gho_``/``ghu_``/
    ``ghs_``/``ghr_``/``github_pat_``), GitLab (``glpat-``), JWTs, AWS access
    key ids (and a 40-char secret right after one), OpenAI/Anthropic
    ``sk-...`` and Stripe keys, Slack ``xox?-``, Google ``AIza...``,
    ``Bearer <token>``, PEM private-key blocks, passwords in
    ``scheme://user:password@host`` URLs, and the values of secret-named
    ``KEY=value``, ``"key": value``, ``key: value``, ``?key=value`` and
    ``--key value`` pairs (see :func:`is_secret_key`).

    Strings without any of these come back unchanged; the result is
    idempotent.
    """
    if not isinstance(s, str):
        raise TypeError(f"redact_text() needs a str, not {type(s).__name__}")
    cached = _CACHE.get(s)
    if cached is not None:
        return cached
    result = _redact_uncached(s)
    if len(s) <= _CACHE_MAX_LEN:
        if len(_CACHE) >= _CACHE_MAX_ENTRIES:
            _CACHE.clear()
        _CACHE[s] = result
    return result


def _redact_uncached(s: str) -> str:
    """The work behind :func:`redact_text`, without the memo."""
    if not might_hold_secret(s):
        return s  # fast path: the overwhelming majority of trace strings
    # Repeat to a fixed point: a replacement changes the context that the
    # look-behinds see, e.g. in "hf_...HF_TOKEN=x" the token swallows "HF",
    # and only "<redacted>_TOKEN=x" shows the pair.  Strings that the first
    # pass leaves alone cost nothing extra; a second pass is rare.
    for _ in range(_MAX_PASSES):
        out = _scan(s)
        if out == s:
            break
        s = out
    return s


def _scan(s: str) -> str:
    """One pass of :data:`PATTERN` over ``s`` (no pre-check, no memo)."""
    spans = [sp for sp in _spans(s) if sp[0] < sp[1]]
    if not spans:
        return s
    spans.sort()
    out: list[str] = []
    done = 0  # s[:done] is emitted
    start, end = spans[0]
    for a, b in spans[1:]:
        if a <= end:  # overlapping or touching: one marker for both
            end = max(end, b)
            continue
        out += (s[done:start], REDACTED)
        done, (start, end) = end, (a, b)
    out += (s[done:start], REDACTED, s[end:])
    return "".join(out)
