"""Packaging beyond pyproject.toml: the repository's top-level `grammar/` and `specs/` ship inside
the package as `xprc/grammar` and `xprc/specs` (see xprc/resources.py), so a wheel or a
`pip install .` compiles from any directory."""

from setuptools import find_packages, setup

DATA_DIRS = {"xprc.grammar": "grammar", "xprc.specs": "specs"}

setup(
    packages=find_packages(include=["xprc", "xprc.*"]) + list(DATA_DIRS),
    package_dir=DATA_DIRS,
    package_data={"xprc.grammar": ["*.lark"], "xprc.specs": ["*.xpr"]},
)
