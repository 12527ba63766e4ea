"""`load_scene`: the (train, test) views of a dataset folder in either format, Blender or COLMAP."""

from __future__ import annotations

from pathlib import Path

from ..errors import DataError
from .blender import load_blender_splits
from .colmap import load_colmap
from .datasets import TEST_EVERY, Dataset, split_every

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


def load_scene(
    root, background=(1.0, 1.0, 1.0), downscale=1, test_every: int = TEST_EVERY
) -> tuple[Dataset, Dataset]:
    """(train, test) from a Blender scene (transforms_train.json, then _test or _val) or a
    COLMAP scene (sparse/, every `test_every`-th view held out)."""
    root = Path(root)
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
        test = next((s for s in ("test", "val") if (root / f"transforms_{s}.json").is_file()), None)
        if test is None:
            missing = "file not found (nor transforms_val.json)"
            raise DataError(root / "transforms_test.json", missing)
        return load_blender_splits(root, test, background, downscale)
    if mark == COLMAP_MARK:
        return split_every(load_colmap(root, downscale, background=background), test_every)
    if not root.is_dir():
        problem = "not a folder" if root.exists() else "folder not found"
        raise DataError(root, f"dataset {problem}")
    raise DataError(
        root, "not a dataset: expected transforms_train.json (Blender) or sparse/ (COLMAP)"
    )
