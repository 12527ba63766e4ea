"""Regenerate the golden modules tests/golden/<name>.py from specs/<name>.xpr (test_codegen.py
compares each with a fresh compile): every golden module that exists, plus the specs named.

    python tests/update_golden.py [SPEC...]

Review the diff before committing it: a change in codegen shows up there."""

import pathlib
import sys

from xprc.compiler.driver import compile_source, read_spec, write_atomic

ROOT = pathlib.Path(__file__).resolve().parent.parent


def update_golden(names=()) -> list[pathlib.Path]:
    golden = ROOT / "tests" / "golden"
    stems = {p.stem for p in golden.glob("*.py")} | {pathlib.Path(n).stem for n in names}
    written = []
    for stem in sorted(stems):
        spec = ROOT / "specs" / f"{stem}.xpr"
        out = golden / f"{stem}.py"
        write_atomic(out, compile_source(read_spec(spec), spec.name, spec_dir=spec.parent))
        written.append(out)
    return written


if __name__ == "__main__":
    if any(a.startswith("-") for a in sys.argv[1:]):
        print("usage: python tests/update_golden.py [SPEC...]", file=sys.stderr)
        sys.exit(2)
    for p in update_golden(sys.argv[1:]):
        print(f"wrote {p.relative_to(ROOT)}")
