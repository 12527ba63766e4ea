"""`MethodInfo`: the data a method module provides, read and checked in one place.

A method is a module (from `xprc.load`, or hand-written) with the functions `activate`,
`project` and `response` and the module-level constants below. Codegen writes every constant
but SPEC_PATH (`xprc.load` sets it); a hand-written or older module may leave any of them out
and gets the one default here. The pipeline, trainer, verifier and viewer read them only through
`MethodInfo.of(method)`, never with a `getattr` and a default of their own.

The constants stay the interface (a copy of a module with one constant replaced is another
method), so `of` reads them each time it is called: call it once where a method comes in.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import types
from collections.abc import Mapping, Sequence, Set

from .errors import XprError, cut_to


@dataclasses.dataclass(frozen=True)
class MethodInfo:
    """The constants of a method module; a field `x` is the module's constant `X`.

    name: the spec's primitive name (messages, checkpoints)
    spec_sha256: sha256 of the spec's text and of its bases' (compiler.driver.spec_digest; "":
        unknown, a checkpoint then matches by name)
    compiler_version: the xprc version that compiled it ("": not compiled)
    params: the parameter table, ParamSpec-like entries (name, kind, shape, activation, ...)
    constants: the spec's `const` values after -D defines, {name: float}
    attrs: names of the per-primitive values the response reads, in attrs order
    num_attrs: A, the width of `project`'s attrs (16 without it: a memory estimate only)
    num_features: C, the channels of `project`'s features (colour)
    uses_ray: the response reads ray.origin / ray.dir (the pipeline then computes pixel rays)
    signed_alpha: the response's alpha may be negative, in (-1, 1) (`response signed`)
    pixel_outputs: the per-pixel outputs the response emits, one name per channel
    camera_models: the camera models the spec accepts (None: every model)
    camera_models_source: why those models ("declared on line 4", or the default's reason)
    rolling_shutter: the projection bounds its footprint over a rolling shutter's exposure (it
        calls camera.shutter_box); without it a rolling-shutter camera is refused
    spec_file: the spec's file name, for located messages (None: unknown)
    spec_path: where `xprc.load` read the spec (None: not loaded from a file)
    """

    name: str = "the method"
    spec_sha256: str = ""
    compiler_version: str = ""
    params: tuple = ()
    constants: Mapping[str, float] = dataclasses.field(default_factory=dict)
    attrs: tuple[str, ...] = ()
    num_attrs: int = 16
    num_features: int = 3
    uses_ray: bool = False
    signed_alpha: bool = False
    pixel_outputs: tuple[str, ...] = ()
    camera_models: tuple[str, ...] | None = None
    camera_models_source: str = ""
    rolling_shutter: bool = False
    spec_file: str | None = None
    spec_path: str | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = _checked(f.name, getattr(self, f.name), "MethodInfo", f.name)
            object.__setattr__(self, f.name, value)

    @classmethod
    def of(cls, method) -> MethodInfo:
        """The constants of `method` (a module or any object with them as attributes), each
        checked; a missing one takes its default. A MethodInfo is returned as it is.

        A value that cannot be a method module (a spec's name or path, a mapping, a sequence,
        an array, a number, None) is an XprError saying to load it first, unless it has one of
        a method's attributes (FUNCTIONS, the constants): wrappers that forward attributes to a
        module are judged by what they have, not by their type."""
        if isinstance(method, MethodInfo):
            return method
        _check_is_method(method)
        label = _label(method)
        values = {}
        for f in dataclasses.fields(cls):
            value = getattr(method, constant(f.name), dataclasses.MISSING)
            if value is not dataclasses.MISSING:
                values[f.name] = _checked(f.name, value, label, constant(f.name))
        return cls(**values)

    @property
    def recorded_spec_path(self) -> str | None:
        """The spec's absolute path, as a run records it (`xprc render RUN` looks there for a
        spec no shipped one matches); None when it was not loaded from a file."""
        return None if self.spec_path is None else os.path.abspath(self.spec_path)

    @property
    def param_table(self) -> dict:
        """{name: ParamSpec-like entry}, in the module's order."""
        return {p.name: p for p in self.params}


def constant(field: str) -> str:
    """The module constant that holds `field` (`num_attrs` -> NUM_ATTRS)."""
    return field.upper()


# The constants codegen writes, in the order it writes them (SPEC_PATH is the loader's).
GENERATED = tuple(constant(f.name) for f in dataclasses.fields(MethodInfo) if f.name != "spec_path")

# The functions a method module defines (codegen writes them; the pipeline calls them).
FUNCTIONS = ("activate", "project", "response")


def _check_is_method(method) -> None:
    """An XprError for a plain value given where a method module belongs (`render("3dgs", ...)`
    read no constant from the string and failed later, naming its parameters or a strategy)."""
    if any(hasattr(method, a) for a in (*FUNCTIONS, *GENERATED, constant("spec_path"))):
        return  # a module, or something forwarding to one (tests' and verify's wrappers)
    if isinstance(method, str | bytes | os.PathLike):
        text = os.fsdecode(method) if isinstance(method, bytes | os.PathLike) else method
        shown = cut_to(repr(text))
        raise XprError(
            f"expected a method module from xprc.load(...), got {type(method).__name__} "
            f"{shown} (load it first: xprc.load({shown}))"
        )
    if (
        method is None
        or isinstance(method, numbers.Number | Mapping | Sequence | Set)
        or (hasattr(method, "shape") and hasattr(method, "dtype"))
    ):
        raise XprError(
            f"expected a method module from xprc.load(...), got "
            f"{'None' if method is None else type(method).__name__} (load "
            "the spec first: method = xprc.load('3dgs'); the parameters come after it: "
            "xprc.render(method, params, camera))"
        )


def _label(method) -> str:
    name = getattr(method, "__name__", None)
    if not isinstance(name, str):
        name = type(method).__name__
    return f"method module '{name}'"


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _strings(v) -> bool:
    return isinstance(v, tuple | list) and all(isinstance(s, str) for s in v)


def _param(p) -> bool:
    shape = getattr(p, "shape", None)
    return (
        isinstance(getattr(p, "name", None), str)
        and isinstance(shape, tuple | list)
        and all(_is_int(d) for d in shape)
    )


# field -> (test, what it must be, normalise)
_KINDS = {
    "str": (lambda v: isinstance(v, str), "a string", lambda v: v),
    "str?": (lambda v: v is None or isinstance(v, str), "a string or None", lambda v: v),
    "int": (lambda v: _is_int(v) and v >= 0, "a non-negative integer", int),
    "bool": (lambda v: isinstance(v, bool), "True or False", lambda v: v),
    "names": (_strings, "a tuple of strings", tuple),
    "names?": (lambda v: v is None or _strings(v), "None or a tuple of strings",
               lambda v: v if v is None else tuple(v)),
    "params": (
        lambda v: isinstance(v, tuple | list) and all(_param(p) for p in v),
        "a tuple of ParamSpec (each with a string name and a tuple shape)",
        tuple,
    ),
    "consts": (
        lambda v: isinstance(v, Mapping)
        and all(isinstance(k, str) and _is_number(x) for k, x in v.items()),
        "a dict of names to numbers",
        lambda v: types.MappingProxyType(dict(v)),
    ),
}  # fmt: skip
_FIELD_KINDS = {
    "name": "str",
    "spec_sha256": "str",
    "compiler_version": "str",
    "params": "params",
    "constants": "consts",
    "attrs": "names",
    "num_attrs": "int",
    "num_features": "int",
    "uses_ray": "bool",
    "signed_alpha": "bool",
    "pixel_outputs": "names",
    "camera_models": "names?",
    "camera_models_source": "str",
    "rolling_shutter": "bool",
    "spec_file": "str?",
    "spec_path": "str?",
}


def _checked(field: str, value, label: str, shown_as: str):
    """`value` for `field` in its normal form; an XprError naming `label` and `shown_as`."""
    test, what, normal = _KINDS[_FIELD_KINDS[field]]
    if not test(value):
        shown = cut_to(repr(value))
        raise XprError(f"{label}: {shown_as} = {shown} is not {what}")
    return normal(value)
