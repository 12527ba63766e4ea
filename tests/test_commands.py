"""`xprc render` / `xprc train` end to end on a tiny generated scene, and their user errors."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import ROOT
from PIL import Image

from xprc.cli import main
from xprc.data.demo_scene import generate_demo_scene
from xprc.data.ply import save_ply
from xprc.data.workloads import random_scene


@pytest.fixture(scope="module")
def tiny_scene(tmp_path_factory):
    root = tmp_path_factory.mktemp("scene")
    generate_demo_scene(root, n_train=3, n_test=2, size=(40, 32), seed=1, n_points=300)
    return root


def test_render_ply_from_dataset_camera(tiny_scene, tmp_path, capsys):
    params = random_scene(50, seed=0)
    params["means"] = params["means"] * 0.2 - np.array([0, 0, 4], np.float32) * 0.2
    ply = tmp_path / "scene.ply"
    save_ply(ply, params)
    out = tmp_path / "view.png"
    code = main(["render", str(ply), "--data", str(tiny_scene), "--view", "1", "-o", str(out)])
    assert code == 0
    img = np.asarray(Image.open(out))
    assert img.shape == (32, 40, 3)
    assert "view 1" in capsys.readouterr().out


def test_render_errors_are_messages(tiny_scene, tmp_path, capsys):
    ply = tmp_path / "scene.ply"
    save_ply(ply, random_scene(5, seed=0))
    code = main(["render", str(ply), "--data", str(tiny_scene), "--view", "9"])
    assert code == 1
    assert capsys.readouterr().err.strip() == "error: --view 9: the test split has 2 views (0..1)"
    code = main(["render", str(tmp_path / "missing.ply"), "--data", str(tiny_scene)])
    assert code == 1
    assert "missing.ply" in capsys.readouterr().err


def test_render_odd_view_and_output_are_messages(tiny_scene, tmp_path, capsys):
    """An empty --view, and -o under a file, are messages (they were a ValueError from pathlib
    and, after the render, a FileExistsError / NotADirectoryError traceback)."""
    ply = tmp_path / "scene.ply"
    save_ply(ply, random_scene(5, seed=0))
    blocker = tmp_path / "file"
    blocker.write_text("")
    base = ["render", str(ply), "--data", str(tiny_scene)]
    for view in ("", "."):
        assert main([*base, "--view", view, "-o", str(tmp_path / "x.png")]) == 1
        assert capsys.readouterr().err.startswith(f"error: --view '{view}': no such image")
    for extra in (["-o", f"{blocker}/x.png"], ["--view", "all", "-o", f"{blocker}/sub/dir"]):
        assert main([*base, *extra]) == 1
        assert capsys.readouterr().err.strip() == (
            f"error: -o '{extra[-1]}': {blocker} is a file, not a folder"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "scene.ply"]


def test_render_scene_of_another_spec_names_the_file(tiny_scene, tmp_path, capsys):
    """A 3DGS PLY rendered with a spec of other parameters: a message naming the PLY (it was
    'parameters missing for ...' with no file), before any render."""
    ply = tmp_path / "scene.ply"
    save_ply(ply, random_scene(5, seed=0))
    argv = ["render", str(ply), "--data", str(tiny_scene), "--spec", "2dgs"]
    assert main([*argv, "-o", str(tmp_path / "x.png")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{ply}: error: parameter 'scales' has shape (5, 3), expected [N, 2]")
    assert err.endswith("; a scene of another --spec?") and not (tmp_path / "x.png").exists()


BAD_COORDINATORS = ["garbage", "host:", ":1234", "host:0", "host:99999", "a b:1", "h:\u0661"]


@pytest.mark.parametrize("address", BAD_COORDINATORS)
def test_coordinator_address_is_checked(address, tiny_scene, tmp_path, capsys, monkeypatch):
    """A malformed XPRC_COORDINATOR is a message at once, not a wait of minutes in
    jax.distributed for a coordinator that cannot exist."""
    monkeypatch.setenv("XPRC_COORDINATOR", address)
    monkeypatch.setenv("XPRC_NUM_PROCESSES", "2")
    monkeypatch.setenv("XPRC_PROCESS_ID", "1")
    argv = ["train", "--data", str(tiny_scene), "--out", str(tmp_path / "run")]
    assert main(argv) == 1
    assert capsys.readouterr().err.strip() == (
        f"error: XPRC_COORDINATOR is {address!r}: it must be HOST:PORT (e.g. host0:1234), a port "
        "in 1..65535"
    )


def test_failure_to_join_the_multi_host_run_is_a_message(tiny_scene, tmp_path, capsys, monkeypatch):
    import xprc.distributed

    def fail(*args):
        raise RuntimeError("DEADLINE_EXCEEDED: Barrier timed out\n(details)")

    monkeypatch.setattr(xprc.distributed, "initialize", fail)
    for name, value in (("COORDINATOR", "[::1]:1234"), ("NUM_PROCESSES", "2"), ("PROCESS_ID", "1")):
        monkeypatch.setenv(f"XPRC_{name}", value)
    assert main(["train", "--data", str(tiny_scene), "--out", str(tmp_path / "run")]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: could not join the multi-host run at [::1]:1234: DEADLINE_EXCEEDED: Barrier "
        "timed out"
    )


def test_multi_host_environment_is_checked(tiny_scene, tmp_path, capsys, monkeypatch):
    """XPRC_COORDINATOR with a missing or non-integer XPRC_NUM_PROCESSES / XPRC_PROCESS_ID was
    a KeyError / ValueError traceback; it is a message naming the variable."""
    monkeypatch.setenv("XPRC_COORDINATOR", "localhost:1234")
    argv = ["train", "--data", str(tiny_scene), "--out", str(tmp_path / "run")]
    cases = [
        (None, "0", "XPRC_NUM_PROCESSES is not set: XPRC_COORDINATOR is set, so it must be an "
                    "integer >= 1"),
        ("two", "0", "XPRC_NUM_PROCESSES is 'two': XPRC_COORDINATOR is set, so it must be an "
                     "integer >= 1"),
        ("2", "2", "XPRC_PROCESS_ID is '2': XPRC_COORDINATOR is set, so it must be an integer "
                   "in 0..1"),
    ]  # fmt: skip
    for processes, process_id, message in cases:
        if processes is None:
            monkeypatch.delenv("XPRC_NUM_PROCESSES", raising=False)
        else:
            monkeypatch.setenv("XPRC_NUM_PROCESSES", processes)
        monkeypatch.setenv("XPRC_PROCESS_ID", process_id)
        assert main(argv) == 1
        assert capsys.readouterr().err.strip() == f"error: {message}"
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def tiny_run(tiny_scene, tmp_path_factory):
    """A 20-step 3DGS run on the tiny scene, through the CLI."""
    out = tmp_path_factory.mktemp("runs") / "run"
    argv = ["train", "--data", str(tiny_scene), "--out", str(out), "--steps", "20"]
    assert main([*argv, "--eval-every", "20"]) == 0
    return out


def test_train_command_writes_a_run_folder(tiny_scene, tiny_run, capsys):
    assert (tiny_run / "metrics.json").exists()
    assert (tiny_run / "checkpoint.npz").exists() and (tiny_run / "scene.ply").exists()
    out = str(tiny_run)
    assert main(["train", "--data", str(tiny_scene), "--out", out, "--devices", "x"]) == 1


def test_a_run_records_its_spec(tiny_run, capsys):
    """What `xprc render` / `view` read to pick the spec is what the trainer writes: the
    checkpoint's metadata, and metrics.json beside a PLY."""
    import xprc
    from xprc.trained import SpecRecord, load_trained, shipped_spec_of

    sha = xprc.load("3dgs").SPEC_SHA256
    ckpt = tiny_run / "checkpoint.npz"
    where = str(ROOT / "specs" / "3dgs.xpr")  # the shipped spec's file, absolute
    assert load_trained(tiny_run).spec == SpecRecord("Gaussian3D", sha, ckpt, where)
    record = load_trained(tiny_run / "scene.ply").spec  # the PLY's header names it (issue 41)
    assert record == SpecRecord("Gaussian3D", sha, tiny_run / "scene.ply", where)
    assert shipped_spec_of(record).name == "3dgs.xpr"


def _render_npy(scene, data, tmp_path, *extra) -> np.ndarray:
    out = tmp_path / "view.npy"
    assert main(["render", str(scene), "--data", str(data), "-o", str(out), *extra]) == 0
    return np.load(out)


def test_render_of_a_run_equals_the_trainers_render(tiny_scene, tiny_run, tmp_path, capsys):
    """The PLY, the checkpoint and the run folder render the trainer's own test view, on the
    background the run was trained with (the demo scene is composited on white)."""
    import xprc
    from xprc.data.scene_folder import load_scene
    from xprc.plots import to_uint8
    from xprc.trained import load_trained

    ply = _render_npy(tiny_run / "scene.ply", tiny_scene, tmp_path, "--view", "r_1")
    ckpt = _render_npy(tiny_run / "checkpoint.npz", tiny_scene, tmp_path, "--view", "r_1")
    run = _render_npy(tiny_run, tiny_scene, tmp_path, "--view", "1")
    assert np.abs(ply - ckpt).max() < 1e-5 and np.abs(run - ckpt).max() == 0
    trainers = np.asarray(Image.open(tiny_run / "renders" / "r_1.png"))
    assert np.array_equal(to_uint8(ckpt), trainers)
    # Independently: the checkpoint's parameters on a white background.
    trained = load_trained(tiny_run / "checkpoint.npz", load_scene(tiny_scene)[0].views)
    assert trained.background == (1.0, 1.0, 1.0)
    cam = load_scene(tiny_scene)[1].views[1].camera()
    white = np.ones(3, np.float32)
    ref = xprc.render(xprc.load("3dgs"), trained.params, cam, background=white).image
    assert np.abs(np.asarray(ref) - ckpt).max() < 1e-5
    black = _render_npy(tiny_run, tiny_scene, tmp_path, "--view", "1", "--background", "0,0,0")
    assert np.abs(black - ckpt).max() > 0.5  # --background wins over the recorded one


def test_render_kinds(tiny_scene, tiny_run, tmp_path, capsys):
    alpha = _render_npy(tiny_run, tiny_scene, tmp_path, "--kind", "alpha")
    depth = _render_npy(tiny_run, tiny_scene, tmp_path, "--kind", "depth")
    assert alpha.shape == depth.shape == (32, 40, 1)
    assert 0 <= alpha.min() and alpha.max() <= 1 and alpha.max() > 0.5
    covered = alpha[..., 0] > 0.5
    assert np.all(np.isfinite(depth)) and 1.0 < np.median(depth[covered]) < 10.0  # camera at 4
    png = tmp_path / "depth.png"
    capsys.readouterr()
    assert main(["render", str(tiny_run), "--data", str(tiny_scene), "--kind", "depth",
                 "-o", str(png)]) == 0  # fmt: skip
    grey = np.asarray(Image.open(png))
    assert grey.shape == (32, 40, 3)
    # the console says what the grey levels mean: the range, in the .npy's units
    note = capsys.readouterr().out.splitlines()[-1]
    m = re.fullmatch(r"  depth: (\S+) \(white\) to (\S+) \(black\), this view's 1st to 99th "
                     r"percentile; (\d+) covered pixel\(s\) beyond them clipped; pixels with "
                     r"alpha <= 0.5 black; -o NAME.npy keeps the values", note)  # fmt: skip
    assert m, note
    lo, hi = np.percentile(depth[covered, 0], (1, 99))
    np.testing.assert_allclose([float(m[1]), float(m[2])], [lo, hi], rtol=1e-3)
    assert int(m[3]) == np.sum((depth[covered, 0] < lo) | (depth[covered, 0] > hi))
    nearest = np.unravel_index(np.argmin(np.where(covered, depth[..., 0], np.inf)), covered.shape)
    assert grey[nearest][0] == 255  # near is white


RENDER_ERRORS = [
    (["--view", "r_7"],
     "error: --view 'r_7': no such image in the test split; its views are r_0, r_1 "
     "(or an index 0..1, or 'all')"),
    (["--view", "5"], "error: --view 5: the test split has 2 views (0..1)"),
    (["--split", "train", "--view", "./test/r_0"],
     "error: --view './test/r_0': no such image in the train split; its views are r_0, r_1, r_2 "
     "(or an index 0..2, or 'all')"),
    (["-o", "{tmp}"], "error: -o '{tmp}' is a folder: give a file name ending in .png or .npy"),
    (["-o", "{tmp}/picture"], "error: -o '{tmp}/picture': give a file name ending in .png or .npy"),
]  # fmt: skip


@pytest.mark.parametrize("extra,message", RENDER_ERRORS, ids=[e[-1] for e, _ in RENDER_ERRORS])
def test_render_errors_list_the_choices(tiny_scene, tiny_run, tmp_path, capsys, extra, message):
    extra = [e.format(tmp=tmp_path) for e in extra]
    assert main(["render", str(tiny_run), "--data", str(tiny_scene), *extra]) == 1
    assert capsys.readouterr().err.strip() == message.format(tmp=tmp_path)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["r_0", "./test/r_0", "test/r_0.png", "0"])
def test_render_view_names(tiny_scene, tiny_run, tmp_path, capsys, name):
    _render_npy(tiny_run, tiny_scene, tmp_path, "--view", name)
    assert "view 0 (./test/r_0): 40x32" in capsys.readouterr().out


def test_render_folder_without_a_scene(tiny_scene, tmp_path, capsys):
    assert main(["render", str(tmp_path), "--data", str(tiny_scene), "-o", "x.png"]) == 1
    assert capsys.readouterr().err.strip() == (
        f"{tmp_path}: error: not a run folder: no checkpoint.npz or scene.ply in it"
    )
