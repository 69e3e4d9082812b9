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

Design notes:

* Pure and stdlib-only so that it can be imported from anywhere (including
  the CLI's output layer) without import cycles.
* Cheap first: a handful of plain substring checks rejects almost every
  trace string (kernel and op names) before any regex runs; the rest get
  one left-to-right pass of a single precompiled alternation.  Results for
  short strings are memoised, since traces repeat names endlessly.
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

import functools
import re
from typing import Any, Match

__all__ = ["REDACTED", "redact_text", "is_secret_key", "redact"]

REDACTED = "<redacted>"

# --------------------------------------------------------------------------
# Key names
# --------------------------------------------------------------------------

# Splits "AWS_SECRET_ACCESS_KEY", "apiKey", "X-Amz-Signature", "HFToken" into
# words, so that "keyboard" or "monkey" do not count as "key".
_WORD_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

# Substrings that make any word secret (they do not occur in harmless words
# often enough to matter).
_SECRET_SUBSTRINGS = (
    "secret",
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "credential",
    "cookie",
    "session",
    "private",
    "signature",
    "webhook",
    "jwt",
)

# Whole words that are secret on their own.
_SECRET_WORDS = frozenset({"key", "keys", "sig", "dsn", "bearer"})

# "apikey", "accesstoken"-style fused words; plain "...key" would catch
# "monkey", "hotkey", "turkey".
_FUSED_KEY_RE = re.compile(
    r"(?:api|access|secret|private|ssh|signing|encryption|master|license|"
    r"licence|client|app|gpg|pgp|service|subscription|hmac|deploy|auth|"
    r"session|account|storage|consumer|bot|admin|root)keys?"
)

# Attention layers name tensors "key_states", "num_key_value_heads",
# "key_padding_mask"; those are shapes/counts, not credentials.
_ATTENTION_WORDS_AFTER_KEY = frozenset(
    {
        "value", "values", "head", "heads", "dim", "dims", "state", "states",
        "proj", "projection", "cache", "caches", "len", "length", "padding",
        "mask", "seq", "seqlen", "scale", "size",
    }
)

# "GIT_AUTHOR_NAME" is a person, not an auth secret.
_AUTHOR_WORDS = frozenset({"author", "authors", "authored", "authorship"})

# $PWD / $OLDPWD are working directories, not passwords.
_WORKING_DIR_KEYS = (("pwd",), ("oldpwd",))


def _is_secret_word(word: str, next_word: str | None) -> bool:
    """Decide one lower-cased word of a key name (see :func:`is_secret_key`)."""
    if any(s in word for s in _SECRET_SUBSTRINGS):
        return True
    if "token" in word:
        # "num_tokens", "max_tokens", "TOKENIZERS_PARALLELISM" are counts and
        # switches that LLM-serving traces carry everywhere.
        return not (word.endswith("tokens") or "tokeniz" in word or "tokenis" in word)
    if "auth" in word:
        return word not in _AUTHOR_WORDS
    if "pwd" in word:
        return True
    if word in ("key", "keys"):
        return next_word not in _ATTENTION_WORDS_AFTER_KEY
    if word in _SECRET_WORDS:
        return True
    return _FUSED_KEY_RE.fullmatch(word) is not None


@functools.lru_cache(maxsize=4096)  # a trace has few distinct keys, seen 1e5+ times
def is_secret_key(key: str) -> bool:
    """Return True if ``key`` (a dict key, env var, or CLI flag) names a secret.

    Matches case-insensitively on the words of the name: TOKEN, KEY,
    SECRET, PASSWORD/PASSWD/PASSPHRASE, CREDENTIAL, AUTH, COOKIE, SESSION,
    PRIVATE, SIGNATURE/SIG, JWT, BEARER, DSN, WEBHOOK, and any word
    containing PWD (``DB_PWD``, ``MYSQL_PWD``).

    Deliberate exceptions, because they are common and harmless:

    * ``PWD`` and ``OLDPWD`` alone (working directories);
    * plural/derived "tokens"/"tokenizer" words (``num_tokens``,
      ``TOKENIZERS_PARALLELISM``);
    * ``author`` words (``GIT_AUTHOR_NAME``);
    * "key" followed by an attention-tensor word (``key_states``,
      ``num_key_value_heads``);
    * "key" inside another word (``keyboard``, ``monkey``), except fused
      forms like ``apikey`` / ``accesskey``.

    >>> is_secret_key("HF_TOKEN"), is_secret_key("PWD"), is_secret_key("--api-key")
    (True, False, True)
    """
    words = [w.lower() for w in _WORD_RE.findall(key)]
    if not words or tuple(words) in _WORKING_DIR_KEYS:
        return False
    for i, word in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else None
        if _is_secret_word(word, nxt):
            return True
    return False


# --------------------------------------------------------------------------
# Text patterns
# --------------------------------------------------------------------------

# A key name as it appears unquoted in text: env var, kwarg, header, flag.
# The trigger words are checked by is_secret_key() in the callback rather
# than in the regex: a lazy case-insensitive alternation at every character
# made this branch the most expensive one.
_BARE_KEY = r"-{0,2}(?=[A-Za-z_])[\w.-]+"
# Not inside another identifier, and not a C++ scope ("ns::token = ...").
_KEY_START = r"(?<![\w.-])(?<!::)"
# Quoted keys and flags are rare, so there the regex can afford the trigger.
_TRIGGER = (
    r"(?i:token|key|secret|pass|pwd|credential|auth|cookie|session|private|"
    r"sig|dsn|webhook|jwt|bearer)"
)
_LIT_REDACTED = re.escape(REDACTED)
_DQ = r'"(?:[^"\\\r\n]|\\.)*"'
_SQ = r"'(?:[^'\\\r\n]|\\.)*'"
_ESC_DQ = r'\\"(?:[^"\\\r\n]|\\[^"\r\n])*\\"'
# HTTP auth scheme kept visible: "Authorization: Bearer <redacted>".
_SCHEME = r"(?:(?i:bearer|basic|token|digest|bot)[ \t]+)"
# An unquoted value runs to whitespace but leaves trailing punctuation that
# is far more likely syntax than secret ("f(token=abc)", "pw=abc.").  No
# value swallows a PEM header: that block has its own branch, which must
# see BEGIN to hide the body on the following lines.
_TRAIL_EXCL = r"""[^\s,;)}\]"'.]"""
_NO_PEM = r"(?!-----BEGIN)"
_UNQ_VALUE = rf"(?:{_NO_PEM}\S)*{_NO_PEM}{_TRAIL_EXCL}"
# "key: value" runs to the end of the line (a Cookie header is all secret).
_REST_OF_LINE = rf"""(?:{_NO_PEM}[^\r\n"'])*{_NO_PEM}{_TRAIL_EXCL}"""
# A 40-char AWS-style secret (base64 alphabet, at least one digit, / or +,
# so plain words do not qualify).
_AWS_SECRET = r"(?<![A-Za-z0-9/+])(?=[A-Za-z0-9/+]*[0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"

_PATTERN_SOURCE = rf"""
# --- PEM private key: keep the armour lines, drop the body (to end of text
#     if the block was truncated) -------------------------------------------
(?P<pem>
    (?P<pem_begin>-----BEGIN[A-Z0-9 ]*PRIVATE[ ]KEY(?:[ ]BLOCK)?-----)
    (?s:.*?)
    (?P<pem_end>-----END[A-Z0-9 ]*PRIVATE[ ]KEY(?:[ ]BLOCK)?-----|\Z)
)
# --- scheme://user:password@host ------------------------------------------
| (?P<url>
    (?P<url_head>(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@"'<>]*:)
    [^\s/?#"']+
    (?=@)
)
# --- URL query parameter (value found by _VALUE_RE["qp"]) -----------------
| (?P<qp>
    (?<=[?&;])(?P<qp_key>(?=[A-Za-z_])[\w.-]*?{_TRIGGER}[\w.-]*)(?P<qp_sep>=)
)
# --- AWS access key id, optionally followed by its 40-char secret ----------
| (?P<aws>
    (?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{{16}}(?![A-Za-z0-9])
    (?:(?P<aws_sep>[ \t,;:|=]+)(?P<aws_secret>{_AWS_SECRET}))?
)
# --- prefixed tokens: one shared look-behind, then literal prefixes --------
| (?P<tok>
    (?<![A-Za-z0-9])
    (?:
        hf_[A-Za-z0-9]{{30,}}
      | gh[pousr]_[A-Za-z0-9]{{30,}}
      | github_pat_[A-Za-z0-9_]{{30,}}
      | glpat-[A-Za-z0-9_-]{{20,}}
      | (?<![_-])eyJ[A-Za-z0-9_-]{{10,}}\.[A-Za-z0-9_-]{{10,}}\.[A-Za-z0-9_-]*
      | (?<![_-])sk-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{{20,}}
      | [sr]k_(?:live|test)_[A-Za-z0-9]{{16,}}
      | xox[baprse]-[A-Za-z0-9-]{{10,}}
      | xapp-[0-9]-[A-Za-z0-9-]{{10,}}
      | (?<![_-])AIza[0-9A-Za-z_-]{{35}}(?![0-9A-Za-z_-])
    )
)
# --- "key": value  /  'key': value  /  \"key\": \"value\" --------------------
| (?P<jkv>
    (?P<jkv_q>\\?["'])
    (?P<jkv_key>[^"'\r\n\\]{{0,100}}?{_TRIGGER}[^"'\r\n\\]{{0,100}}?)
    (?P=jkv_q)
    (?P<jkv_sep>[ \t]*[:=][ \t]*)
    (?P<jkv_val>{_LIT_REDACTED}|{_DQ}|{_SQ}|{_ESC_DQ}|(?![{{\[])(?:{_NO_PEM}[^\s,}}\]"'<])+)
)
# --- unquoted key: KEY=value (env dumps, kwargs, --flag=value),
#     key: value (headers, YAML), key <40-char AWS-style secret> ("aws
#     configure set ...").  The first two match only up to the value, which
#     _pair() then reads with _VALUE_RE: matching an unbounded value here
#     made "a: a: a: ..." quadratic, as each harmless key rescanned the line.
| (?P<kv>
    {_KEY_START}(?P<kv_key>{_BARE_KEY})
    (?:
        (?P<eq_sep>[ \t]*=(?!=)[ \t]*)(?P<eq_scheme>{_SCHEME})?
      | (?P<col_sep>:(?!:)[ \t]+)(?P<col_scheme>{_SCHEME})?
      | (?P<ws_sep>[ \t]+)(?P<ws_val>{_AWS_SECRET})
    )
)
# --- --flag value (command lines); a value never starts with '-' ----------
| (?P<cli>
    (?<![\w-])(?P<cli_key>--?(?=[A-Za-z])[\w.-]*?{_TRIGGER}[\w.-]*)
    (?P<cli_sep>[ \t]+)
    (?P<cli_val>{_LIT_REDACTED}|{_DQ}|{_SQ}|(?!-){_UNQ_VALUE})
)
# --- Bearer <token> in free text; a digit keeps "bearer" prose out ---------
| (?P<bearer>
    (?P<bearer_head>(?<![A-Za-z0-9])(?i:bearer)[ \t]+)
    (?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{{8,}}=*
)
"""

# ASCII: keys and token alphabets are ASCII, and a Unicode \w in the key
# look-behind would let "éHF_TOKEN=..." hide its pair.
_PATTERN = re.compile(_PATTERN_SOURCE, re.VERBOSE | re.ASCII)


_CPP_WINDOW = 4096


def _in_cpp_with_clause(m: Match[str], sep: str) -> bool:
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


def _redact_value(val: str) -> str:
    """Redact a matched value, keeping its quotes so syntax stays intact."""
    if val in ("", "null", "None"):
        # Mirrors redact(): an absent value reveals nothing.
        return val
    for q in ('\\"', '"', "'"):
        if len(val) >= 2 * len(q) and val.startswith(q) and val.endswith(q):
            inner = val[len(q) : -len(q)]
            return val if inner == "" else q + REDACTED + q
    return REDACTED


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
    "qp": re.compile(rf"""{_LIT_REDACTED}|[^&#\s"'<]+""", re.ASCII),
    "eq": re.compile(rf"{_LIT_REDACTED}|{_DQ}|{_SQ}|{_UNQ_VALUE}", re.ASCII),
    "col": re.compile(rf"{_LIT_REDACTED}|{_DQ}|{_SQ}|{_REST_OF_LINE}", re.ASCII),
}


def _pair(m: Match[str], kind: str) -> tuple[str, int]:
    """Replace a key/value match: see :func:`_replace` for the contract."""
    if kind == "kv":
        kind = "eq" if m.group("eq_sep") is not None else (
            "col" if m.group("col_sep") is not None else "ws"
        )
    key_g, val_g = _PAIR_GROUPS[kind]
    key = m.group(key_g)
    text = m.string
    val_start = m.end() if val_g is None else m.start(val_g)
    # Text before the key (an opening quote) and from the key to the value
    # (closing quote, separator, auth scheme) is kept as it is...
    head = text[m.start() : m.start(key_g)]
    between = text[m.end(key_g) : val_start]
    # ...but the key itself could be token-shaped ("ghp_...=1").
    prefix = head + redact_text(key) + between
    if is_secret_key(key) and not (kind == "eq" and _in_cpp_with_clause(m, m.group("eq_sep"))):
        if val_g is not None:
            return prefix + _redact_value(m.group(val_g)), m.end()
        vm = _VALUE_RE[kind].match(text, val_start)
        if vm is not None:
            return prefix + _redact_value(vm.group()), vm.end()
    # Not a secret (or no value): keep the value and scan it like any other
    # text (it may hold a token, a URL password or another pair).  Resuming
    # inside, rather than recursing on the value, keeps "a: b: c: ..." linear.
    return prefix, val_start


def _replace(m: Match[str]) -> tuple[str, int]:
    """Replacement for one match of :data:`_PATTERN`.

    Returns the text that replaces ``m.string[m.start():resume]`` and
    ``resume``, the index at which scanning continues (``m.end()`` unless
    part of the match must be scanned again).
    """
    kind = m.lastgroup
    if kind == "pem":
        return m.group("pem_begin") + REDACTED + m.group("pem_end"), m.end()
    if kind == "url":
        return m.group("url_head") + REDACTED, m.end()
    if kind == "aws":
        if m.group("aws_secret") is not None:
            return REDACTED + m.group("aws_sep") + REDACTED, m.end()
        return REDACTED, m.end()
    if kind == "bearer":
        return m.group("bearer_head") + REDACTED, m.end()
    if kind == "tok":
        return REDACTED, m.end()  # the whole token is the secret
    return _pair(m, kind)


# Lower-case substrings at least one of which is in every string that
# _PATTERN would change: the secret-key trigger words, the token prefixes,
# "://" for URLs and "private" for PEM blocks.
# Plain `in` scans run at memory speed, an order of magnitude faster than
# the alternation, and almost every trace string fails all of them.
_MARKERS = (
    "key", "token", "auth", "session", "pass", "pwd", "sig", "secret",
    "credential", "cookie", "private", "dsn", "webhook", "jwt", "bearer",
    "://", "akia", "asia", "abia", "acca", "hf_", "ghp_", "gho_", "ghu_",
    "ghs_", "ghr_", "github_pat_", "glpat-", "eyj", "sk-", "sk_", "rk_",
    "xox", "xapp-", "aiza",
)


def _might_hold_secret(s: str) -> bool:
    """Cheap pre-check: False guarantees that redact_text() would return ``s``."""
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
    if not _might_hold_secret(s):
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
    """Apply :data:`_PATTERN` to ``s`` (no pre-check, no memo)."""
    # re.sub() cannot resume scanning inside a match, which non-secret pairs
    # need (see _pair), so walk the matches by hand.
    out: list[str] = []
    done = 0  # s[:done] has been emitted
    m = _PATTERN.search(s)
    while m is not None:
        replacement, resume = _replace(m)
        out.append(s[done : m.start()])
        out.append(replacement)
        done = resume
        # Look-behinds still see s[:resume], so context is never lost.
        m = _PATTERN.search(s, resume)
    if not out:
        return s
    out.append(s[done:])
    return "".join(out)


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
            hide_next = v.startswith("-") and "=" not in v and is_secret_key(v)
            out.append(redact_text(v))
        else:
            hide_next = False
            out.append(v if vt in _SCALARS else redact(v))
    return out


def redact(obj: Any) -> Any:
    """Return a redacted deep copy of a JSON-like value; never mutates ``obj``.

    * A dict value whose key satisfies :func:`is_secret_key` becomes
      :data:`REDACTED` whatever its type (numbers, bools, nested dicts
      included), unless it is None or empty.
    * Every other string, at any depth (dict values, list/tuple items), goes
      through :func:`redact_text`.  Dict keys are kept as they are.
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
        out = {}
        for k, v in obj.items():
            vt = type(v)
            if type(k) is str and is_secret_key(k) and not _is_blank(v):
                out[k] = REDACTED
            elif vt is str:
                out[k] = redact_text(v)
            elif vt in _SCALARS:
                out[k] = v
            else:
                out[k] = redact(v)
        return out
    if isinstance(obj, list):
        return _redact_items(obj)
    if isinstance(obj, tuple):
        return tuple(_redact_items(obj))
    if isinstance(obj, str):  # str subclasses
        return redact_text(obj)
    return obj
