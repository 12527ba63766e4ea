"""The `xprc` command line.

    xprc compile SPEC [-o OUT.py] [--emit ast|sympy|jax] [-D NAME=VALUE]...
    xprc check SPEC [-D NAME=VALUE]...
    xprc render | train | view | demo ...   (xprc/commands.py)

SPEC is a .xpr path or a shipped spec's name (`3dgs`): see xprc.resources.

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


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default: argparse's own '(default: X)', 'off' for a
    flag; an option whose default is None says in its own help what happens without it."""

    def _get_help_string(self, action) -> str:
        text = action.help or ""
        if action.required:
            return text + " (required)"
        if "default:" in text or not action.option_strings or action.default is None:
            return text
        if action.default is False:
            return text + " (default: off)"
        if action.default == []:
            return text + " (default: none)"
        return super()._get_help_string(action)


def _spec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="a .xpr file, or the name of a shipped spec (e.g. 3dgs)")
    add_define_option(p)


def _compile_args(p: argparse.ArgumentParser) -> None:
    _spec_args(p)
    p.add_argument("-o", "--output", help="write the result here (default: stdout)")
    p.add_argument(
        "--emit",
        choices=("ast", "checked", "sympy", "jax"),
        default="jax",
        help="what to output: the parsed AST, the checked IR, the simplified SymPy programs, or "
        "the generated JAX module",
    )


def _read(spec: str) -> tuple[str, str]:
    """A spec argument (a path, or a shipped spec's name) -> (text, the name errors show)."""
    from xprc.compiler import driver
    from xprc.resources import spec_path

    path = spec_path(spec)
    return driver.read_spec(path), spec if path == pathlib.Path(spec) else str(path)


def _compile(args) -> int:
    from xprc.compiler import driver

    text, name = _read(args.spec)
    if args.output == "":  # an unset shell variable (`-o "$OUT"`) must not mean stdout
        raise XprError("-o '': empty file name; leave out -o to write to stdout")
    out = driver.emit(text, name, args.emit, args.defines)
    if args.output is not None:
        # keep: `-o` may not overwrite the spec being compiled (XprError)
        driver.write_atomic(pathlib.Path(args.output), out, keep=(pathlib.Path(name),))
    else:
        sys.stdout.write(out)
    return 0


def _check(args) -> int:
    from xprc.compiler import driver

    text, name = _read(args.spec)
    checked = driver.check_source(text, name, args.defines)  # on the deep-spec stack
    print(f"{args.spec}: ok ({checked.name}, {len(checked.params)} parameters)")
    return 0


register(
    "compile",
    "compile a spec to a JAX module (or dump a stage with --emit)",
    _compile_args,
    _compile,
)
register("check", "check a spec for errors without generating code", _spec_args, _check)


def _verify_args(p: argparse.ArgumentParser) -> None:
    from xprc import verify

    verify.add_arguments(p)


def _verify(args) -> int:
    from xprc import verify

    return verify.run(args)


register(
    "verify",
    "render random scenes with the spec's footprints and with whole-image ones; exit 1 when "
    "a footprint loses a contribution",
    _verify_args,
    _verify,
)


def build_parser() -> argparse.ArgumentParser:
    from xprc import __version__, commands  # noqa: F401  (registers render, train, view, demo)

    parser = argparse.ArgumentParser(
        prog="xprc", description="point-based rendering compiler", formatter_class=HelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"xprc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help, add_arguments, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help, description=help, formatter_class=HelpFormatter)
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
