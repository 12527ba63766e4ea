"""The `xprc` command line: one module per command, in this package.

    xprc compile SPEC [-o OUT.py] [--emit ast|checked|sympy|jax] [-D NAME=VALUE]...
    xprc check SPEC [-D NAME=VALUE]...
    xprc verify SPEC ...
    xprc render | train | eval | view | capture | demo ...

SPEC is a .xpr path or a shipped spec's name (`3dgs`): see xprc.resources. Each command's module
has `add_arguments(parser)` and `run(args)`; the argument types and options they share are in
`args`.

The subcommands are one explicit, ordered table, `COMMANDS` (no registration by import side
effect: a registry filled from imports would depend on which modules happened to be imported,
and `python -m` would see another copy of it). Exit status 0 on success, 1 on a user error (an
XprError, printed to stderr without a traceback) or when memory runs out, 2 on bad usage
(argparse; a bare `xprc` prints the commands), 130 on Ctrl-C. Output never fails on a
character the terminal cannot encode (a file name that is not UTF-8, PYTHONIOENCODING=ascii):
such characters are escaped.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import signal
import sys
import warnings
from collections.abc import Callable

from .. import compile_cache
from ..errors import SpecWarning, XprError, printable, shortened
from . import capture, check, compile, demo, render, train, verify, view
from . import eval as eval_command


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


_SPEC_MEMORY = "the spec is too large to compile; simplify it (fewer loop steps, smaller arrays)"

# The subcommands, in the order `xprc --help` lists them.
COMMANDS: dict[str, Command] = {
    "compile": Command(
        "compile a spec to a JAX module (or dump a stage with --emit)",
        compile.add_arguments,
        compile.run,
        _SPEC_MEMORY,
    ),
    "check": Command(
        "check a spec for errors without generating code",
        check.add_arguments,
        check.run,
        _SPEC_MEMORY,
    ),
    "verify": Command(
        "render random scenes with the spec's footprints and with whole-image ones; exit 1 "
        "when a footprint loses a contribution",
        verify.add_arguments,
        verify.run,
        "lower --seeds, or simplify the spec",
    ),
    "render": Command(
        "render a scene from a dataset camera",
        render.add_arguments,
        render.run,
        "use a larger --downscale, a smaller --max-entries, or one --view at a time",
    ),
    "train": Command(
        "train any spec on a Blender or COLMAP dataset",
        train.add_arguments,
        train.run,
        "use a larger --downscale or a smaller --capacity",
    ),
    "eval": Command(
        "PSNR and SSIM of a trained scene on the held-out views, per view and the mean, to JSON",
        eval_command.add_arguments,
        eval_command.run,
        "use a larger --downscale (or --images images_8)",
    ),
    "view": Command(
        "look at a trained scene in the browser (needs xprc[viewer])",
        view.add_arguments,
        view.run,
        "view a smaller scene, or leave out --data",
    ),
    "capture": Command(
        "generate the benchmark capture: a COLMAP scene in the Mip-NeRF 360 layout, ray traced "
        "(no download)",
        capture.add_arguments,
        capture.run,
        "use fewer --jobs, or a smaller --size",
    ),
    "demo": Command(
        "generate the bundled demo scene and train a spec on it (no download)",
        demo.add_arguments,
        demo.run,
        "the demo needs about 1 GB; close other programs",
    ),
}


class _Parser(argparse.ArgumentParser):
    """argparse's parser (its subcommands' too), whose error line is printable and at most
    `errors.MAX_MESSAGE` characters: it quotes what was typed (an unknown command of 100 KB
    whole; `unrecognized arguments: ...` raw, a newline or a terminal escape included)."""

    def error(self, message: str):
        super().error(shortened(printable(message)))


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = _Parser(
        prog="xprc", description="point-based rendering compiler", formatter_class=HelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"xprc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")  # none: `main` lists them
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
    """A warning as the CLI shows it: `warning: MESSAGE`, one line, no source location; a spec's
    warning as it formats itself (`FILE:LINE:COL: warning: ...` and a caret)."""
    out = sys.stderr if file is None else file
    if isinstance(message, SpecWarning):
        print(str(message), file=out)  # made printable by its formatting
        return
    print(printable(f"warning: {message}"), file=out)


def main(argv: list[str] | None = None) -> int:
    escape_unencodable_output()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # argparse said only "the following arguments are required: COMMAND"
        parser.print_help(sys.stderr)
        print("\nxprc: error: give a COMMAND; 'xprc COMMAND --help' shows its options",
              file=sys.stderr)  # fmt: skip
        return 2
    command = COMMANDS[args.command]
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            compile_cache.warn_pending()  # held back from `import xprc`, to be printed so
            return int(command.run(args) or 0)
    except XprError as e:
        print(str(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        # a stop signal while a run wrote its outputs (StopSignal, after its checkpoint), or
        # Ctrl-C elsewhere: the conventional status, 128 + the signal's number
        said = f": {e}" if str(e) else ""
        print(printable(f"xprc {args.command}: interrupted{said}"), file=sys.stderr)
        return 128 + getattr(e, "signum", signal.SIGINT)
    except OSError as e:  # a path the system refuses (name too long, loops, ...): one line
        where = f"{os.fsdecode(e.filename)}: " if e.filename is not None else ""
        print(printable(f"error: xprc {args.command}: {where}{e.strerror or e}"), file=sys.stderr)
        return 1
    except (MemoryError, RuntimeError) as e:
        what = _out_of_memory(e)
        if what is None:
            raise
        print(printable(f"error: xprc {args.command} ran {what}: {command.memory}"),
              file=sys.stderr)  # fmt: skip
        return 1
