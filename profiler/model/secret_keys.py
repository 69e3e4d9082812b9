"""Does a key, variable or flag name denote a secret? (`is_secret_key`; used by `redact`.)

Names are split into words ("AWS_SECRET_ACCESS_KEY", "apiKey", "X-Amz-Signature"), so that
"keyboard" or "monkey" do not count as "key", and LLM vocabulary ("num_tokens", "key_states")
is not mistaken for credentials. When in doubt about a key, it is secret: a lost value is
cheap, a leaked token is not.
"""

from __future__ import annotations

import functools
import re

__all__ = ["is_secret_key"]


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
        "value",
        "values",
        "head",
        "heads",
        "dim",
        "dims",
        "state",
        "states",
        "proj",
        "projection",
        "cache",
        "caches",
        "len",
        "length",
        "padding",
        "mask",
        "seq",
        "seqlen",
        "scale",
        "size",
    }
)

# "bytes_per_token", "time_to_first_token": rates and latencies of LLM serving, not credentials.
_WORDS_BEFORE_COUNTED_TOKEN = frozenset({"per", "first", "next"})

# "GIT_AUTHOR_NAME" is a person, not an auth secret.
_AUTHOR_WORDS = frozenset({"author", "authors", "authored", "authorship"})

# "KeyError", "TokenExpiredError", "auth_warning": an exception or warning names what went wrong,
# and what follows it ("KeyError: 'weight'") is its message, not a credential.
_PROBLEM_WORDS = frozenset({"error", "errors", "exception", "warning", "warnings"})

# $PWD / $OLDPWD are working directories, not passwords.
_WORKING_DIR_KEYS = (("pwd",), ("oldpwd",))


def _is_secret_word(word: str, next_word: str | None, prev_word: str | None = None) -> bool:
    """Decide one lower-cased word of a key name (see :func:`is_secret_key`)."""
    if any(s in word for s in _SECRET_SUBSTRINGS):
        return True
    if word == "token" and prev_word in _WORDS_BEFORE_COUNTED_TOKEN:
        return False
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
      ``TOKENIZERS_PARALLELISM``), and "token" after per/first/next
      (``bytes_per_token``, ``time_to_first_token``);
    * ``author`` words (``GIT_AUTHOR_NAME``);
    * "key" followed by an attention-tensor word (``key_states``,
      ``num_key_value_heads``);
    * "key" inside another word (``keyboard``, ``monkey``), except fused
      forms like ``apikey`` / ``accesskey``;
    * names of exceptions and warnings (``KeyError``, ``TokenExpiredError``).

    >>> is_secret_key("HF_TOKEN"), is_secret_key("PWD"), is_secret_key("--api-key")
    (True, False, True)
    """
    words = [w.lower() for w in _WORD_RE.findall(key)]
    if not words or tuple(words) in _WORKING_DIR_KEYS or (len(words) > 1 and words[-1] in _PROBLEM_WORDS):
        return False
    for i, word in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else None
        if _is_secret_word(word, nxt, words[i - 1] if i else None):
            return True
    return False
