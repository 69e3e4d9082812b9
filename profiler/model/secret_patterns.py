"""The regular expression that finds secrets in free text (`redact.redact_text` uses it).

One alternation, anchored on distinctive prefixes (hf_, ghp_, eyJ, AKIA...) or on a key name;
each branch names its groups so `redact` can tell which part of a match to hide.
A model module: stdlib, and the REDACTED marker.
"""

from __future__ import annotations

import re

from profiler.model.redact_marker import REDACTED

# A key name as it appears unquoted in text: env var, kwarg, header, flag.
# Whether it is secret is left to is_secret_key() on each match: a lazy
# case-insensitive trigger alternation at every character made this the
# most expensive branch.
_BARE_KEY = r"-{0,2}(?=[A-Za-z_])[\w.-]+"
# Not inside another identifier, and not a C++ scope ("ns::token = ...").
_KEY_START = r"(?<![\w.-])(?<!::)"
# Quoted keys and flags are rare, so there the regex can afford the trigger.
_TRIGGER = (
    r"(?i:token|key|secret|pass|pwd|credential|auth|cookie|session|private|"
    r"sig|dsn|webhook|jwt|bearer)"
)
LIT_REDACTED = re.escape(REDACTED)
DQ = r'"(?:[^"\\\r\n]|\\.)*"'
SQ = r"'(?:[^'\\\r\n]|\\.)*'"
_ESC_DQ = r'\\"(?:[^"\\\r\n]|\\[^"\r\n])*\\"'
# HTTP auth scheme kept visible: "Authorization: Bearer <redacted>".
_SCHEME = r"(?:(?i:bearer|basic|token|digest|bot)[ \t]+)"
# An unquoted value runs to whitespace but leaves trailing punctuation that
# is far more likely syntax than secret ("f(token=abc)", "pw=abc.").  No
# value swallows a PEM header: that block has its own branch, which must
# see BEGIN to hide the body on the following lines.
_TRAIL_EXCL = r"""[^\s,;)}\]"'.]"""
_NO_PEM = r"(?!-----BEGIN)"
# Nor does it start with "--": that is the next flag of a command line,
# whose own value must stay visible to the --flag branch.
UNQ_VALUE = rf"(?!--)(?:{_NO_PEM}\S)*{_NO_PEM}{_TRAIL_EXCL}"
# "key: value" runs to the end of the line (a Cookie header is all secret),
# or to a quote (the end of the string it sits in), or to a " --flag".
REST_OF_LINE = rf"""(?:{_NO_PEM}(?![ \t]--)[^\r\n"'])*{_NO_PEM}{_TRAIL_EXCL}"""
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
    (?P<jkv_val>{LIT_REDACTED}|{DQ}|{SQ}|{_ESC_DQ}|(?![{{\[])(?!--)(?:{_NO_PEM}[^\s,}}\]"'<])+)
)
# --- unquoted key: KEY=value (env dumps, kwargs, --flag=value),
#     key: value (headers, YAML), key <40-char AWS-style secret> ("aws
#     configure set ...").  The first two match only up to the value, which
#     _pair_spans() reads with _VALUE_RE if the key is secret: matching an
#     unbounded value here made "a: a: a: ..." quadratic.
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
    (?P<cli_val>{LIT_REDACTED}|{DQ}|{SQ}|(?!-){UNQ_VALUE})
)
# --- Bearer <token> in free text; a digit keeps "bearer" prose out ---------
| (?P<bearer>
    (?P<bearer_head>(?<![A-Za-z0-9])(?i:bearer)[ \t]+)
    (?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{{8,}}=*
)
"""

# ASCII: keys and token alphabets are ASCII, and a Unicode \w in the key
# look-behind would let "éHF_TOKEN=..." hide its pair.
PATTERN = re.compile(_PATTERN_SOURCE, re.VERBOSE | re.ASCII)
