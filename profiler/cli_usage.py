"""Bad command-line arguments as one line, like bad input: `perf: <problem> (see 'perf analyze --help')`.

Click (under Typer) prints a usage line, a hint and a boxed message for an unknown option or a
value that does not parse: five lines, and a file name with a newline or an escape sequence in it
would reach the terminal raw. Here the error is caught around the whole command and printed as
one escaped, redacted line on stderr, exit 2; everything else runs as Typer runs it.
"""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperGroup

try:  # Typer 0.2x carries its own copy of Click
    from typer._click import exceptions as _click_errors
except ImportError:  # older Typer runs on Click itself
    from click import exceptions as _click_errors

from profiler.model.errors import printable


def one_line(problem: str) -> str:
    """`perf: <problem>` on one line: control characters escaped, secrets redacted."""
    from profiler.model.redact import redact_text

    return f"perf: {printable(redact_text(problem))}"


class OneLineUsage(TyperGroup):
    """The root command group: usage errors become one line (module docstring); the command's
    plain values are read without pydantic (profiler/cli/plain_values.py)."""

    def parse_args(self, ctx: Any, args: list[str]) -> Any:
        from profiler.cli.plain_values import seed

        seed(self, ctx)  # the group's own options (--version, --help)
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, cmd, rest = super().resolve_command(ctx, args)
        from profiler.cli.plain_values import seed

        seed(cmd, ctx)
        return name, cmd, rest

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _click_errors.NoArgsIsHelpError as e:  # `perf` alone: the help was printed
            code = e.exit_code
        except _click_errors.ClickException as e:
            ctx = getattr(e, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            print(one_line(e.format_message() + hint), file=sys.stderr)
            code = e.exit_code
        except typer.Abort:
            print("Aborted!", file=sys.stderr)
            code = 1
        else:  # standalone_mode=False returns an Exit's code (or the command's None: success)
            if not standalone_mode:
                return rv
            code = rv if isinstance(rv, int) else 0
        if not standalone_mode:
            raise typer.Exit(code)
        sys.exit(code)
