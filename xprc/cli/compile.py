"""`xprc compile SPEC [-o OUT.py] [--emit ast|checked|sympy|jax] [-D NAME=VALUE]...`"""

from __future__ import annotations

import argparse
import pathlib
import sys

from ..errors import XprError, printable
from .args import read_spec, spec_args


def add_arguments(p: argparse.ArgumentParser) -> None:
    spec_args(p)
    p.add_argument("-o", "--output", help="write the result here, '-' for stdout (default: stdout)")
    p.add_argument(
        "--emit",
        choices=("ast", "checked", "sympy", "jax"),
        default="jax",
        help="what to output: the parsed AST, the checked IR, the simplified SymPy programs, or "
        "the generated JAX module",
    )


def run(args) -> int:
    from ..compiler import driver

    text, name = read_spec(args.spec)
    if args.output == "":  # an unset shell variable (`-o "$OUT"`) must not mean stdout
        raise XprError("-o '': empty file name; leave out -o to write to stdout")
    out = driver.emit(text, name, args.emit, args.defines)
    if args.output not in (None, "-"):  # '-' is stdout, as in most tools ('./-' a file)
        # keep: `-o` may not overwrite the spec being compiled (XprError)
        target = pathlib.Path(args.output)
        missing = next((p for p in reversed(target.parents) if not p.exists()), None)
        driver.write_atomic(target, out, keep=(pathlib.Path(name),))
        if missing is not None:  # write_atomic made it (and those under it): said, as render does
            print(printable(f"created the folder {target.parent}"), file=sys.stderr)
    else:
        sys.stdout.write(out)
    return 0
