"""The `xprc` command line.

    xprc compile SPEC [-o OUT.py] [--emit ast|sympy|jax] [-D NAME=VALUE]...
    xprc check SPEC [-D NAME=VALUE]...

Each subcommand is a pair (add its arguments, run it) registered in COMMANDS; other modules add
theirs with `register`. Exit status 0 on success, 1 on a user error (an XprError, printed to
stderr without a traceback), 2 on bad usage (argparse).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Callable

from xprc.errors import XprError

# name -> (help, add_arguments(parser), run(args) -> exit status)
COMMANDS: dict[str, tuple[str, Callable, Callable]] = {}


def register(name: str, help: str, add_arguments: Callable, run: Callable) -> None:
    """Add a subcommand: `add_arguments(parser)` declares its options, `run(args)` returns 0/1."""
    COMMANDS[name] = (help, add_arguments, run)


def add_define_option(p: argparse.ArgumentParser) -> None:
    """`-D NAME=VALUE`, repeatable: override a constant of the spec."""
    p.add_argument(
        "-D",
        dest="defines",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a constant of the spec (repeatable)",
    )


def _spec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="the .xpr spec")
    add_define_option(p)


def _compile_args(p: argparse.ArgumentParser) -> None:
    _spec_args(p)
    p.add_argument("-o", "--output", help="write the result here (default: stdout)")
    p.add_argument(
        "--emit",
        choices=("ast", "sympy", "jax"),
        default="jax",
        help="what to output: the parsed AST, the simplified SymPy programs, or the "
        "generated JAX module (default)",
    )


def _compile(args) -> int:
    from xprc.compiler import driver

    text = driver.read_spec(pathlib.Path(args.spec))
    name = args.spec
    out = driver.emit(text, name, args.emit, args.defines)
    if args.output:
        # keep: `-o` may not overwrite the spec being compiled (XprError)
        driver.write_atomic(pathlib.Path(args.output), out, keep=(pathlib.Path(name),))
    else:
        sys.stdout.write(out)
    return 0


def _check(args) -> int:
    from xprc.compiler import driver

    path = pathlib.Path(args.spec)
    text = driver.read_spec(path)
    checked = driver.check_source(text, args.spec, args.defines)  # on the deep-spec stack
    print(f"{args.spec}: ok ({checked.name}, {len(checked.params)} parameters)")
    return 0


register(
    "compile",
    "compile a spec to a JAX module (or dump a stage with --emit)",
    _compile_args,
    _compile,
)
register("check", "check a spec for errors without generating code", _spec_args, _check)


def build_parser() -> argparse.ArgumentParser:
    from xprc import commands  # noqa: F401  (registers render, train, demo)

    parser = argparse.ArgumentParser(prog="xprc", description="point-based rendering compiler")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help, add_arguments, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help, description=help)
        add_arguments(p)
        p.set_defaults(_run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except XprError as e:
        print(str(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
