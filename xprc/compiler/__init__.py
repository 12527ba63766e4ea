"""The spec compiler: driver.py runs its stages (parse, check, lower, simplify, codegen)."""

COMPILER_VERSION = "0.1.0"  # written into every generated module, and part of the cache key
