"""The spec compiler: driver.py runs its stages (parse, check, lower, simplify, codegen)."""

from xprc._version import __version__

COMPILER_VERSION = __version__  # written into every generated module, and part of the cache key
