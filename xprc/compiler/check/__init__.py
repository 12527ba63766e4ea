"""Stage 2, the checker: AST -> typed IR (ast.Checked). `check(spec, defines)` is the entry
point; checker.py says how the package is split."""

from xprc.compiler.check.checker import Checker, check

__all__ = ["Checker", "check"]
