"""`xprc render` / `view` of a run use the -D constants it was trained with (they used the spec's
defaults, without a word), and `xprc train` / `demo --out` never replace a user's files in a
folder that is not a run (a scene.ply or config.json there was replaced silently)."""

from __future__ import annotations

import numpy as np
import pytest

from xprc.cli import main
from xprc.data.demo_scene import generate_demo_scene
from xprc.train.folder import RUN_FILES

TRAINED_WITH = ["-D", "antialiased=1", "-D", "eps2d=2"]


@pytest.fixture(scope="module")
def tiny_scene(tmp_path_factory):
    root = tmp_path_factory.mktemp("scene")
    generate_demo_scene(root, n_train=3, n_test=1, size=(32, 32), seed=1, n_points=300)
    return root


@pytest.fixture(scope="module")
def run_aa(tiny_scene, tmp_path_factory):
    """A 2-step run trained with non-default constants, into an existing empty folder."""
    out = tmp_path_factory.mktemp("runs") / "run_aa"
    out.mkdir()  # an empty folder is no one's files: a run may go there
    argv = ["train", "--data", str(tiny_scene), "--out", str(out), "--steps", "2"]
    assert main([*argv, "--eval-every", "0", *TRAINED_WITH]) == 0
    return out


def _render(scene, data, out, *extra) -> int:
    return main(["render", str(scene), "--data", str(data), "-o", str(out), *extra])


def test_render_of_a_run_uses_its_constants(run_aa, tiny_scene, tmp_path, capsys):
    capsys.readouterr()
    assert _render(run_aa, tiny_scene, tmp_path / "a.npy") == 0
    assert capsys.readouterr().err == (
        f"note: {run_aa / 'checkpoint.npz'}: using the constants the run was trained with: "
        "-D antialiased=1 -D eps2d=2\n"
    )
    # the same -D as the run: nothing to say, the same image
    assert _render(run_aa, tiny_scene, tmp_path / "b.npy", *TRAINED_WITH) == 0
    assert capsys.readouterr().err == ""
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))
    # the run's PLY, named directly, takes them from its checkpoint too
    assert _render(run_aa / "scene.ply", tiny_scene, tmp_path / "c.npy") == 0
    assert "using the constants the run was trained with" in capsys.readouterr().err
    # a bare PLY (no run folder) keeps the spec's defaults: what the render was before
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "x.ply").write_bytes((run_aa / "scene.ply").read_bytes())
    white = ["--background", "1,1,1"]  # (the run's, inferred from the data)
    assert _render(bare / "x.ply", tiny_scene, tmp_path / "d.npy", *white) == 0
    assert "using the constants" not in capsys.readouterr().err
    assert _render(bare / "x.ply", tiny_scene, tmp_path / "e.npy", *white, *TRAINED_WITH) == 0
    capsys.readouterr()
    c, d, e = (np.load(tmp_path / f"{n}.npy") for n in "cde")
    np.testing.assert_array_equal(c, e)
    assert np.abs(c - d).max() > 0.01


@pytest.mark.parametrize("command", ["render", "view"])
def test_a_define_that_contradicts_the_run_is_refused(
    command, run_aa, tiny_scene, tmp_path, capsys
):
    capsys.readouterr()
    extra = ["-D", "eps2d=3", "-D", "antialiased=1"]
    if command == "render":
        assert _render(run_aa, tiny_scene, tmp_path / "v.png", *extra) == 1
        assert not (tmp_path / "v.png").exists()
    else:
        assert main(["view", str(run_aa), "--port", "1", *extra]) == 1
    assert capsys.readouterr().err == (
        f"{run_aa / 'checkpoint.npz'}: error: the run was trained with other constants "
        "(eps2d=2 in the run, -D eps2d=3 given); leave out -D eps2d: the run's values are used "
        "by default\n"
    )


def test_a_malformed_recorded_constant_is_a_message(tiny_scene, tmp_path, capsys):
    from xprc.data.npz import load_checkpoint, save_checkpoint
    from xprc.data.workloads import random_scene

    ckpt = tmp_path / "run.npz"
    meta = {"inputs": {"spec.constants.eps2d": "wide"}}
    save_checkpoint(ckpt, {"params": random_scene(5, seed=0)}, meta)
    assert load_checkpoint(ckpt)[1] == meta
    assert _render(ckpt, tiny_scene, tmp_path / "v.png") == 1
    assert capsys.readouterr().err == (
        f"{ckpt}: error: corrupt checkpoint: recorded constant 'spec.constants.eps2d' must be a "
        "finite number, got 'wide'\n"
    )


def test_train_never_replaces_a_users_files(tiny_scene, tmp_path, capsys):
    mine = tmp_path / "userdir"
    mine.mkdir()
    (mine / "scene.ply").write_bytes(b"my own scene")
    (mine / "config.json").write_text('{"mine": 1}')
    argv = ["train", "--data", str(tiny_scene), "--out", str(mine), "--steps", "1"]
    want = (
        f"error: --out '{mine}' already holds files a new run writes (config.json, scene.ply) "
        "and no checkpoint.npz to resume from: they would be replaced; give another folder, or "
        "move them away\n"
    )
    # --resume where there is nothing to resume starts a new run: refused the same way (the
    # message used to suggest it, and it replaced both files)
    for extra in ([], ["--resume"]):
        assert main(argv + extra) == 1
        assert capsys.readouterr().err == want
    assert sorted(p.name for p in mine.iterdir()) == ["config.json", "scene.ply"]
    assert (mine / "scene.ply").read_bytes() == b"my own scene"
    assert (mine / "config.json").read_text() == '{"mine": 1}'


def test_a_run_that_failed_before_its_first_checkpoint_can_be_run_again(tiny_scene, tmp_path):
    """A run that stops early leaves train.log (appended to) and train.lock (taken over): they
    blocked the corrected command."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "train.log").write_text("2026-12-06 08:00:00 xprc train: an earlier attempt\n")
    (run / "train.lock").write_text("")
    assert main(["train", "--data", str(tiny_scene), "--out", str(run), "--steps", "1",
                 "--eval-every", "0"]) == 0  # fmt: skip
    assert (run / "checkpoint.npz").is_file()
    assert "an earlier attempt" in (run / "train.log").read_text()


def test_every_file_a_run_writes_is_guarded(tiny_scene, tmp_path, capsys):
    """The list is the run folder's own (`xprc.train.folder.RUN_FILES`); past three, a count."""
    mine = tmp_path / "userdir"
    mine.mkdir()
    for name in RUN_FILES[2:]:  # (checkpoint and metrics: 'already holds a run', as before)
        (mine / name).write_text("mine")
    assert main(["train", "--data", str(tiny_scene), "--out", str(mine), "--steps", "1"]) == 1
    err = capsys.readouterr().err
    more = len(RUN_FILES[2:]) - 3
    assert f"(config.json, scene.ply, curves.png and {more} more)" in err


def test_demo_never_replaces_a_users_files(tmp_path, capsys):
    mine = tmp_path / "userdir"
    (mine / "renders").mkdir(parents=True)
    (mine / "renders" / "r_0.png").write_bytes(b"my render")
    assert main(["demo", "--out", str(mine), "--steps", "1"]) == 1
    assert capsys.readouterr().err.startswith(
        f"error: --out '{mine}' already holds files a new run writes (renders/) and no "
    )
    assert (mine / "renders" / "r_0.png").read_bytes() == b"my render"
    assert [p.name for p in mine.iterdir()] == ["renders"]


def test_render_says_which_folder_it_created(run_aa, tiny_scene, tmp_path, capsys):
    target = tmp_path / "new" / "deeper" / "v.png"
    capsys.readouterr()
    assert _render(run_aa, tiny_scene, target, *TRAINED_WITH) == 0
    out = capsys.readouterr().out.splitlines()
    assert target.is_file()
    assert out[-1] == f"created the folder {target.parent}"
    assert _render(run_aa, tiny_scene, target, *TRAINED_WITH) == 0  # it exists now: no line
    assert "created the folder" not in capsys.readouterr().out


class _View:
    def __init__(self, name):
        self.name = name


def test_view_names_that_match_several_views_are_refused():
    from xprc.cli.render import _pick_views
    from xprc.errors import XprError

    views = [_View(n) for n in ("./test/a/r_0.png", "./test/b/r_0.png", "./test/r_1.png")]
    with pytest.raises(XprError, match=r"--view 'r_0' names 2 views of the test split \("
                       r"'./test/a/r_0.png', './test/b/r_0.png'\); give the name with its "
                       r"folder and extension, or an index"):  # fmt: skip
        _pick_views(views, "r_0", "test")
    assert _pick_views(views, "test/b/r_0.png", "test") == [(1, views[1])]
    assert _pick_views(views, "r_1", "test") == [(2, views[2])]
    # the same image in two formats: named apart by the extension
    twins = [_View("r_0.png"), _View("r_0.jpg")]
    with pytest.raises(XprError, match="names 2 views"):
        _pick_views(twins, "r_0", "test")
    assert _pick_views(twins, "r_0.jpg", "test") == [(1, twins[1])]


def test_digits_that_are_an_index_and_another_views_name_are_refused():
    from xprc.cli.render import _pick_views
    from xprc.errors import XprError

    views = [_View(f"images/{n}.png") for n in (0, 8, 16, 24, 32, 40, 48, 56, 64)]
    with pytest.raises(XprError, match=r"--view 8 is ambiguous: view 8 is 'images/64.png', and "
                       r"view 1 is named 'images/8.png'; give '#8' for the index, or the "
                       r"image's file name for the other"):  # fmt: skip
        _pick_views(views, "8", "test")
    assert _pick_views(views, "#8", "test") == [(8, views[8])]
    assert _pick_views(views, "8.png", "test") == [(1, views[1])]
    assert _pick_views(views, "0", "test") == [(0, views[0])]  # index and name agree
    with pytest.raises(XprError, match=r"--view #9: the test split has 9 views \(0..8\)"):
        _pick_views(views, "#9", "test")


def test_digits_past_the_views_that_name_one_are_that_view():
    from xprc.cli.render import _pick_views

    views = [_View(f"images/{n}.png") for n in (1, 12, 20)]
    assert _pick_views(views, "12", "test") == [(1, views[1])]
