"""`load_scene`: the (train, test) views of a dataset folder in either format, Blender or COLMAP."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from ..errors import DataError, XprError, printable
from .blender import load_blender_splits
from .colmap import load_colmap
from .datasets import TEST_EVERY, Dataset, split_every
from .files import require_file
from .undistort import undistort_views

__all__ = ["dataset_mark", "dataset_marks", "load_scene"]

BLENDER_MARK = "transforms_train.json"  # a file
COLMAP_MARK = "sparse"  # a folder


def dataset_marks(root) -> list[str]:
    """Every mark of a dataset folder `root` holds (`transforms_train.json`, `sparse`)."""
    root = Path(root)
    found = [(BLENDER_MARK, (root / BLENDER_MARK).is_file()),
             (COLMAP_MARK, (root / COLMAP_MARK).is_dir())]  # fmt: skip
    return [mark for mark, there in found if there]


def dataset_mark(root) -> str | None:
    """What makes `root` a dataset folder (`transforms_train.json`, `sparse`), or None. A folder
    with both is a dataset too; `load_scene` refuses to choose between them."""
    marks = dataset_marks(root)
    return marks[0] if marks else None


def colmap_images(images: str | None, downscale) -> tuple[str, float, bool]:
    """(images_dir, downscale, shrunk_only) for `load_colmap` from `--images NAME` and
    `--downscale`.

    NAME ending in `_N` (`images_4`) is the Mip-NeRF 360 layout: the images of `images/` shrunk
    N times, read as they are (`load_colmap` with downscale N); any other NAME holds images at
    the cameras' size (downscale as given). Both NAME_N and a downscale other than 1 is an
    XprError: they say the factor twice."""
    if images is None:
        return "images", downscale, False
    if not images or "/" in images or "\\" in images or images in (".", ".."):
        raise XprError(f"--images '{printable(images[:60])}': give the name of an image folder "
                       "inside the dataset folder (e.g. images_4)")  # fmt: skip
    m = re.fullmatch(r"(.+)_([0-9]{1,3})", images)
    if m is None or int(m[2]) < 2:
        return images, downscale, False
    if downscale != 1:
        raise XprError(f"--images {printable(images)} already reads the images shrunk "
                       f"{int(m[2])} times; leave out --downscale {downscale:g}")  # fmt: skip
    return m[1], int(m[2]), True


def load_scene(
    root,
    background=(1.0, 1.0, 1.0),
    downscale=1,
    test_every: int | None = None,
    images: str | None = None,
    undistort: bool = False,
) -> tuple[Dataset, Dataset]:
    """(train, test) from a Blender scene (transforms_train.json, then _test or _val) or a
    COLMAP scene (sparse/, every `test_every`-th view held out: None, the Mip-NeRF 360
    protocol's 8; `images`: the image folder, see `colmap_images`). `test_every` and `images`
    are an XprError for a Blender scene, whose split and images its files name. `undistort`:
    resample lens cameras (COLMAP's, or a transforms.json `camera_model`) to pinhole ones
    (`xprc.data.undistort`). Both carry `source`: the folder and these options."""
    root = Path(root)
    train, test = _load_scene(root, background, downscale, test_every, images, undistort)
    source = {
        "path": str(root.resolve()),
        "downscale": downscale if type(downscale) is int else None,  # what --downscale says
        "images": None if images is None else str(images),
        "test_every": test_every,
        "undistort": bool(undistort),
    }
    return (dataclasses.replace(train, source=source),
            dataclasses.replace(test, source=source))  # fmt: skip


def _load_scene(root: Path, background, downscale, test_every, images, undistort):
    """`load_scene` without the source record."""
    marks = dataset_marks(root)
    if len(marks) > 1:  # (Blender was read without a word, the COLMAP model ignored)
        raise DataError(
            root,
            f"holds both a Blender scene ({BLENDER_MARK}) and a COLMAP one ({COLMAP_MARK}/): "
            "which one to read is ambiguous; move one of them away (from Python, "
            "xprc.data.load_blender or load_colmap reads the one you name)",
        )
    mark = marks[0] if marks else None
    if mark == BLENDER_MARK:
        pairs = (("--images", images), ("--test-every", test_every))
        given = [option for option, value in pairs if value is not None]
        if given:  # (they would be ignored without a word)
            raise XprError(f"{' and '.join(given)}: for COLMAP scenes; {root} is a Blender "
                           "scene, whose transforms files name its images and split")  # fmt: skip
        test = next((s for s in ("test", "val") if (root / f"transforms_{s}.json").is_file()), None)
        if test is None:
            missing = "file not found (nor transforms_val.json)"
            raise DataError(root / "transforms_test.json", missing)
        train, test_set = load_blender_splits(root, test, background, downscale)
        if not undistort:
            return train, test_set
        # both splits in one call: cameras of one size get one size in both
        views = undistort_views(train.views + test_set.views, root / BLENDER_MARK)
        n = len(train.views)
        return (dataclasses.replace(train, views=views[:n]),
                dataclasses.replace(test_set, views=views[n:]))  # fmt: skip
    if mark == COLMAP_MARK:
        every = TEST_EVERY if test_every is None else test_every
        if not (isinstance(every, int) and every >= 2):
            raise XprError(f"--test-every must be an integer >= 2 (every N-th view is held out), "
                           f"got {every!r}")  # fmt: skip
        folder, factor, exact = colmap_images(images, downscale)
        dataset = load_colmap(
            root, factor, folder, background, shrunk_only=exact, undistort=undistort
        )
        return split_every(dataset, every)
    if not root.is_dir():
        problem = "not a folder" if root.exists() else "folder not found"
        raise DataError(root, f"dataset {problem}")
    _check_unusable_marks(root)
    raise DataError(
        root, "not a dataset: expected transforms_train.json (Blender) or sparse/ (COLMAP)"
    )


def _check_unusable_marks(root: Path) -> None:
    """A DataError naming a mark that is there but cannot be one (a dangling link, a folder
    named transforms_train.json, a link to a device, a file named sparse): the folder is
    not said to hold neither."""
    for mark, kind in ((BLENDER_MARK, "file"), (COLMAP_MARK, "folder")):
        path = root / mark
        if not os.path.lexists(path):
            continue
        if os.path.islink(path) and not os.path.exists(path):
            raise DataError(path, f"a symbolic link to {printable(os.readlink(path))}, which "
                            "does not exist")  # fmt: skip
        if kind == "file":
            require_file(path)
        else:
            raise DataError(path, "not a folder (a COLMAP scene keeps its model in sparse/)")
