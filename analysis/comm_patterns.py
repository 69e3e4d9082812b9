"""The table of collective names (analysis/collectives.yaml) and the user's additions to it.

A `Patterns` value is the ordered list of rules; `bundled()` is the table shipped here and
`with_user_file(path)` puts a user's rules (same format) before it. The first rule whose regular
expression is found in a name gives the collective's kind and, for ops, which argument is the
message. Reading the user's file (where it is looked for) is the facade's job (profiler.api).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from profiler.model.errors import InputError

BUNDLED = Path(__file__).with_name("collectives.yaml")
KINDS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "send_recv",
    "barrier",
    "collective",
)


@dataclass(frozen=True)
class Rule:
    """One row of the table: `match` searched in a name -> `kind` ('\\1': the first group, through
    the aliases); `message`: the op argument that is the message (None: bytes not derivable)."""

    match: re.Pattern
    kind: str
    message: int | None
    source: str


@dataclass(frozen=True)
class Patterns:
    rules: tuple[Rule, ...]

    def find(self, name: str) -> Rule | None:
        """The first rule whose expression is found in `name`, or None."""
        for r in self.rules:
            if r.match.search(name):
                return r
        return None

    def kind(self, name: str, aliases: dict[str, str]) -> str | None:
        """Our kind of the collective named `name` ('collective' when the rule's group is no
        known alias), or None when no rule finds it."""
        for r in self.rules:
            m = r.match.search(name)
            if m is None:
                continue
            if r.kind.startswith("\\"):
                group = m.group(int(r.kind[1:])) or ""
                key = group.lower()
                return aliases.get(key) or aliases.get(key.lstrip("_")) or "collective"
            return r.kind
        return None


def parse(doc: object, origin: Path) -> tuple[Rule, ...]:
    """Rules of one YAML document ({'collectives': [{match, kind, message?, source?}, ...]});
    InputError naming `origin` and the entry when it is malformed."""
    if not isinstance(doc, dict) or not isinstance(doc.get("collectives"), list):
        raise InputError(origin, "expected a mapping with a 'collectives' list (see analysis/collectives.yaml)")
    rules = []
    for i, e in enumerate(doc["collectives"]):
        where = f"collectives[{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("match"), str) or not isinstance(e.get("kind"), str):
            raise InputError(origin, f"{where}: needs 'match' (a regular expression) and 'kind'")
        try:
            rx = re.compile(e["match"], re.IGNORECASE)
        except re.error as err:
            raise InputError(origin, f"{where}: bad regular expression {e['match']!r}: {err}") from None
        kind = e["kind"]
        if kind not in KINDS and not re.fullmatch(r"\\[1-9]", kind):
            raise InputError(origin, f"{where}: kind {kind!r} is not one of {', '.join(KINDS)} or '\\1'")
        if kind.startswith("\\") and rx.groups < int(kind[1:]):
            raise InputError(origin, f"{where}: kind {kind!r} names a group the expression lacks")
        msg = e.get("message")
        if msg is not None and (not isinstance(msg, int) or isinstance(msg, bool) or msg < 0):
            raise InputError(origin, f"{where}: message must be an argument index (0, 1, ...)")
        rules.append(Rule(rx, kind, msg, str(e.get("source", ""))))
    return tuple(rules)


#: libyaml's safe loader where PyYAML has it: the same documents, ~10x faster (0.04 s a run)
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read(path: Path) -> tuple[Rule, ...]:
    """Rules of a YAML file; InputError (naming it) when unreadable or malformed."""
    try:
        doc = yaml.load(Path(path).read_text(), Loader=_SAFE_LOADER)
    except OSError as e:
        raise InputError(path, f"cannot read collectives table: {e.strerror or e}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise InputError(path, f"not valid YAML: {str(e).splitlines()[0]}") from None
    return parse(doc, Path(path))


@cache
def bundled() -> Patterns:
    """The table shipped with the analysis (analysis/collectives.yaml)."""
    return Patterns(read(BUNDLED))


def with_user_file(path: Path | None) -> Patterns:
    """The user's rules (tried first) followed by the bundled table; the bundled table alone
    when `path` is None."""
    return bundled() if path is None else Patterns(read(path) + bundled().rules)
