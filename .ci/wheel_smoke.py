"""Run by .ci/wheel_check.sh with the fresh venv's python, in a folder outside the checkout:
the installed wheel compiles every shipped spec by name and trains and renders a tiny scene."""

import pathlib
import subprocess
import sys

import numpy as np
from PIL import Image

import xprc
from xprc.data.demo_scene import generate_demo_scene
from xprc.resources import shipped_specs

here = pathlib.Path.cwd()
package = pathlib.Path(xprc.__file__).resolve().parent
assert "site-packages" in package.parts, f"xprc imported from {package}, not the wheel"
xprc_cli = str(pathlib.Path(sys.executable).parent / "xprc")


def run(*argv: str) -> None:
    print("+ xprc", " ".join(argv), flush=True)
    subprocess.run([xprc_cli, *argv], check=True)


names = list(shipped_specs())
assert len(names) >= 4, names
for name in names:
    run("compile", name, "-o", f"{name}.py")
    assert xprc.load(name).NAME
generate_demo_scene(here / "scene", n_train=3, n_test=2, size=(40, 32), seed=1, n_points=300)
run("train", "--spec", "3dgs", "--data", "scene", "--out", "run", "--steps", "10")
run("render", "run", "--data", "scene", "--view", "r_0", "-o", "r_0.png")
image = np.asarray(Image.open("r_0.png"))
assert image.shape == (32, 40, 3) and image.std() > 5, (image.shape, image.std())
print(f"wheel check: {len(names)} specs compiled by name; tiny scene trained, rendered in {here}")
