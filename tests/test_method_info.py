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
