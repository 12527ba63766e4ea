"""The `xprc` command line.

    xprc compile SPEC [-o OUT.py] [--emit ast|checked|sympy|jax] [-D NAME=VALUE]...
    xprc check SPEC [-D NAME=VALUE]...
    xprc verify SPEC ...                    (xprc/verify.py)
    xprc render | train | view | demo ...   (xprc/commands.py)

SPEC is a .xpr path or a shipped spec's name (`3dgs`): see xprc.resources.

The subcommands are one explicit, ordered table, `COMMANDS` (no registration by import side
effect: `python -m xprc.cli` runs this file as `__main__` besides the imported `xprc.cli`, and a
registry filled from imports would be split between the two). Exit status 0 on success, 1 on a
user error (an XprError, printed to stderr without a traceback) or when memory runs out, 2 on
bad usage (argparse), 130 on Ctrl-C. Output never fails on a character the terminal cannot
encode (a file name that is not UTF-8, PYTHONIOENCODING=ascii): such characters are escaped.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import pathlib
import sys
import warnings
from collections.abc import Callable

from xprc.cli import commands
from xprc.cli.commands import add_define_option, path_arg
from xprc.errors import XprError, printable


@dataclasses.dataclass(frozen=True)
class Command:
    """A subcommand: `add_arguments(parser)` declares its options, `run(args)` returns 0/1;
    `memory` says what to reduce when it runs out of memory."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    memory: str


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default, once: argparse's own '(default: X)', 'off'
    for a flag; an option whose default is None, or whose help already says its default
    ('default:' in it), is left as written."""

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
    p.add_argument(
        "spec", type=path_arg, help="a .xpr file, or the name of a shipped spec (e.g. 3dgs)"
    )
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
    print(printable(f"{args.spec}: ok ({checked.name}, {len(checked.params)} parameters)"))
    return 0


def _verify_args(p: argparse.ArgumentParser) -> None:
    from xprc import verify

    verify.add_arguments(p)


def _verify(args) -> int:
    from xprc import verify

    return verify.run(args)


_SPEC_MEMORY = "the spec is too large to compile; simplify it (fewer loop steps, smaller arrays)"

# The subcommands, in the order `xprc --help` lists them.
COMMANDS: dict[str, Command] = {
    "compile": Command(
        "compile a spec to a JAX module (or dump a stage with --emit)",
        _compile_args,
        _compile,
        _SPEC_MEMORY,
    ),
    "check": Command(
        "check a spec for errors without generating code", _spec_args, _check, _SPEC_MEMORY
    ),
    "verify": Command(
        "render random scenes with the spec's footprints and with whole-image ones; exit 1 "
        "when a footprint loses a contribution",
        _verify_args,
        _verify,
        "lower --seeds, or simplify the spec",
    ),
    "render": Command(
        "render a scene from a dataset camera",
        commands.add_render_args,
        commands.run_render,
        "use a larger --downscale, a smaller --max-entries, or one --view at a time",
    ),
    "train": Command(
        "train any spec on a Blender or COLMAP dataset",
        commands.add_train_args,
        commands.run_train,
        "use a larger --downscale or a smaller --capacity",
    ),
    "view": Command(
        "look at a trained scene in the browser (needs xprc[viewer])",
        commands.add_view_args,
        commands.run_view,
        "view a smaller scene, or leave out --data",
    ),
    "demo": Command(
        "generate the bundled demo scene and train a spec on it (no download)",
        commands.add_demo_args,
        commands.run_demo,
        "the demo needs about 1 GB; close other programs",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    from xprc import __version__

    parser = argparse.ArgumentParser(
        prog="xprc", description="point-based rendering compiler", formatter_class=HelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"xprc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        p = sub.add_parser(
            name, help=command.help, description=command.help, formatter_class=HelpFormatter
        )
        command.add_arguments(p)
    return parser


def escape_unencodable_output() -> None:
    """stdout and stderr write a character their encoding lacks as a backslash escape instead
    of raising UnicodeEncodeError (PYTHONIOENCODING=ascii, a file name that is not UTF-8)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors in ("strict", "surrogateescape"):
            stream.reconfigure(errors="backslashreplace")


def _out_of_memory(e: BaseException) -> str | None:
    """What ran out, for a MemoryError (host memory) or XLA's RESOURCE_EXHAUSTED (device)."""
    first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
    if isinstance(e, MemoryError):
        return f"out of memory ({first})" if first else "out of memory"
    if isinstance(e, RuntimeError) and first.startswith("RESOURCE_EXHAUSTED"):
        return f"out of device memory ({first})"
    return None


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as the CLI shows it: `warning: MESSAGE`, one line, no source location."""
    print(printable(f"warning: {message}"), file=sys.stderr if file is None else file)


def main(argv: list[str] | None = None) -> int:
    escape_unencodable_output()
    args = build_parser().parse_args(argv)
    command = COMMANDS[args.command]
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return int(command.run(args) or 0)
    except XprError as e:
        print(str(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"xprc {args.command}: interrupted", file=sys.stderr)
        return 130
    except (MemoryError, RuntimeError) as e:
        what = _out_of_memory(e)
        if what is None:
            raise
        print(printable(f"error: xprc {args.command} ran {what}: {command.memory}"),
              file=sys.stderr)  # fmt: skip
        return 1


if __name__ == "__main__":
    sys.exit(main())
