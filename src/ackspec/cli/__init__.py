"""``ackspec`` command line: one sub-command per module of this package.

Each ``ackspec.cli.<name>_cmd`` module exposes ``register(subparsers)``, which adds
its sub-command and sets ``func`` on the parsed namespace. ``func(args)`` returns
the process exit code. Errors the user can fix are raised as
:class:`ackspec.errors.AckspecError` and printed as one line: no tracebacks for
bad input.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Sequence

from ackspec import __version__
from ackspec.errors import AckspecError

COMMAND_MODULES = ("run", "report", "spec", "broker", "bench", "matrix", "brokers")
"""Sub-command modules, in the order ``ackspec --help`` lists them."""


_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def plain_text(text: str) -> str:
    """Help text without reStructuredText markup: the docstrings the help is built from use
    ``literal`` and :mod:`role` markup, which a terminal shows as literal backticks."""
    return _ROLE.sub(r"\1", text).replace("``", "")


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors in one line with exit code 2, and prints help as plain text."""

    def format_help(self) -> str:
        return plain_text(super().format_help())

    def format_usage(self) -> str:
        return plain_text(super().format_usage())

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"ackspec: error: {message} (see 'ackspec {self.prog.split()[-1]} --help')\n"
                  if " " in self.prog else f"ackspec: error: {message} (see 'ackspec --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ackspec", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"ackspec {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"ackspec.cli.{name}_cmd")
        except ModuleNotFoundError as exc:
            if exc.name == f"ackspec.cli.{name}_cmd":
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one sub-command; its errors are one line, and Ctrl-C anywhere (even while the
    sub-commands' modules are still importing) is one line and exit 130, never a traceback."""
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        code: int = args.func(args)
    except AckspecError as exc:
        print(f"ackspec: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("ackspec: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_went_away()
    return code


def _reader_went_away() -> int:
    """The reader of our output closed it (``ackspec spec list | head``): stop quietly, as a
    command killed by SIGPIPE would. Python would otherwise fail again flushing stdout at
    exit, so stdout is pointed at /dev/null first."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 128 + 13  # the shell's status for a command ended by SIGPIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
