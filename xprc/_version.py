"""The package version, read by xprc/__init__.py, the compiler (generated modules' headers and
the cache key) and the packaging (pyproject.toml's dynamic version)."""

__version__ = "0.1.0"
