"""MethodInfo: the one reading of a method module's constants (xprc/method_info.py)."""

import ast as pyast
import pathlib
import types

import pytest

from xprc.compiler import driver
from xprc.errors import XprError
from xprc.method_info import GENERATED, MethodInfo

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = sorted((ROOT / "tests" / "golden").glob("*.py"))


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: p.stem)
def test_codegen_writes_every_field_in_order(golden):
    tree = pyast.parse(golden.read_text())
    names = [
        node.targets[0].id
        for node in tree.body
        if isinstance(node, pyast.Assign) and node.targets[0].id.isupper()
    ]
    assert tuple(names) == GENERATED


def test_a_generated_module_reads_back_whole():
    method = driver.load(ROOT / "specs" / "3dgs.xpr")
    info = MethodInfo.of(method)
    assert info.name == "Gaussian3D" and info.num_attrs == len(info.attrs) == 6
    assert info.num_features == 3 and info.camera_models == ("pinhole",)
    assert dict(info.constants) == {"eps2d": 0.3, "antialiased": 0.0}
    assert info.params == method.PARAMS and info.spec_path == method.SPEC_PATH
    assert MethodInfo.of(info) is info


def test_a_module_without_constants_gets_the_defaults():
    assert MethodInfo.of(object()) == MethodInfo()
    partial = MethodInfo.of(types.SimpleNamespace(NAME="Blob", SIGNED_ALPHA=True))
    assert partial.name == "Blob" and partial.signed_alpha and partial.pixel_outputs == ()


def test_a_wrong_type_names_the_module_and_the_constant():
    with pytest.raises(XprError) as e:
        MethodInfo.of(types.ModuleType("my_method"))  # fine: no constants
        bad = types.ModuleType("my_method")
        bad.NUM_FEATURES = "3"
        MethodInfo.of(bad)
    assert str(e.value) == (
        "error: method module 'my_method': NUM_FEATURES = '3' is not a non-negative integer"
    )
    with pytest.raises(XprError, match="MethodInfo: camera_models = 'pinhole' is not None or"):
        MethodInfo(camera_models="pinhole")


LOAD_FIRST = "error: expected a method module from xprc.load(...), got "
VALUE_HINT = (
    " (load the spec first: method = xprc.load('3dgs'); the parameters come after it: "
    "xprc.render(method, params, camera))"
)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("3dgs", "str '3dgs' (load it first: xprc.load('3dgs'))"),
        (
            pathlib.PurePosixPath("specs/3dgs.xpr"),
            "PurePosixPath 'specs/3dgs.xpr' (load it first: xprc.load('specs/3dgs.xpr'))",
        ),
        ({"means": 0}, "dict" + VALUE_HINT),
        (None, "None" + VALUE_HINT),
        (3, "int" + VALUE_HINT),
        (("3dgs",), "tuple" + VALUE_HINT),
    ],
)
def test_a_value_that_is_no_method_module_says_to_load_it(value, message):
    """The audit: render("3dgs", ...) read no constant from the string and failed later with
    "unknown parameters for the method: means, quats, ..."; train("3dgs", ...) blamed the
    strategy."""
    with pytest.raises(XprError) as e:
        MethodInfo.of(value)
    assert str(e.value) == LOAD_FIRST + message


def test_render_and_train_of_a_spec_name_say_to_load_it_first():
    import numpy as np

    import xprc
    from xprc.camera import look_at
    from xprc.train import train

    method = driver.load(ROOT / "specs" / "3dgs.xpr")
    cam = look_at([0.0, 0.0, -4.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], 16, 12, 60.0)
    params = {p.name: np.zeros((2, *p.shape), np.float32) for p in method.PARAMS}
    message = LOAD_FIRST + "str '3dgs' (load it first: xprc.load('3dgs'))"
    with pytest.raises(XprError) as e:
        xprc.render("3dgs", params, cam)
    assert str(e.value) == message
    with pytest.raises(XprError) as e:
        train("3dgs", None)
    assert str(e.value) == message
    with pytest.raises(XprError) as e:
        xprc.render(params, method, cam)  # the arguments swapped
    assert str(e.value) == LOAD_FIRST + "dict" + VALUE_HINT


def test_wrappers_and_partial_methods_are_judged_by_their_attributes():
    """Objects that forward attributes to a module (tests/test_tiles.py WithoutEllipse,
    verify's switch) or carry only some of a method's attributes are methods."""
    method = driver.load(ROOT / "specs" / "3dgs.xpr")

    class Forwarding:
        def __init__(self, inner):
            self._inner = inner

        def __getattr__(self, name):
            return getattr(self._inner, name)

    assert MethodInfo.of(Forwarding(method)) == MethodInfo.of(method)
    assert MethodInfo.of(types.SimpleNamespace(project=None)) == MethodInfo()
    assert MethodInfo.of(types.SimpleNamespace(SPEC_PATH="x.xpr")).spec_path == "x.xpr"

    class Named(str):  # a str that carries a method's constants is judged by them
        NAME = "Odd"

    assert MethodInfo.of(Named("x")).name == "Odd"
