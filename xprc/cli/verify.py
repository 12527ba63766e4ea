"""`xprc verify SPEC`: render random scenes with the spec's footprints and with whole-image ones;
exit 1 when a footprint loses a contribution (xprc.verify)."""

from __future__ import annotations

import math

from ..errors import XprError, printable
from ..verify import MAX_SEEDS, MODELS, TOL, verify_file
from .args import add_define_option, int_range, path_arg


def add_arguments(p) -> None:
    p.add_argument("spec", type=path_arg, help="the .xpr spec")
    add_define_option(p)
    p.add_argument(
        "--seeds",
        type=int_range(1, MAX_SEEDS, "a positive integer (1, 2, ...)"),
        default=2,
        help="random scenes of each kind",
    )
    p.add_argument(
        "--models",
        default=None,
        help="camera models, comma-separated (default: every model the spec accepts, its "
        f"'cameras'; models: {','.join(MODELS)})",
    )
    p.add_argument("--tol", type=float, default=TOL, help="largest allowed difference")


def run(args) -> int:
    import jax

    jax.config.update("jax_enable_x64", True)
    models = None
    if args.models is not None:
        models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    bad = [m for m in models or () if m not in MODELS]
    if bad or models == ():
        raise XprError(f"--models: unknown camera model '{bad[0] if bad else ''}' "
                       f"(expected {', '.join(MODELS)})")  # fmt: skip
    twice = [m for i, m in enumerate(models or ()) if m in models[:i]]
    if twice:  # each model's checks would run (and be reported) twice
        raise XprError(f"--models: camera model '{twice[0]}' is listed twice")
    if args.seeds < 1:
        raise XprError(f"--seeds must be >= 1, got {args.seeds}")
    if not math.isfinite(args.tol) or args.tol < 0:
        raise XprError(f"--tol must be a finite number >= 0, got {args.tol}")
    report = verify_file(
        args.spec, args.defines, models=models, seeds=tuple(range(args.seeds)), tol=args.tol
    )
    print(printable(report.format()))
    return 0 if report.ok else 1
