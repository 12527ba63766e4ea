"""`xprc render RUN` of a run trained with a user's spec (no shipped spec matches its sha256)
stopped with "give its .xpr file with --spec", although the run knew where that file was. A run
now records the spec's absolute path, and render uses the file there when its text still has
the recorded sha256 (with a note); otherwise the error says what became of it. The record is
untrusted: a file it names is read only as a spec, and nothing of it is quoted unless it is the
recorded spec."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from conftest import ROOT

from xprc.cli import main
from xprc.data.demo_scene import generate_demo_scene
from xprc.data.npz import load_checkpoint, save_checkpoint


@pytest.fixture(scope="module")
def tiny_scene(tmp_path_factory):
    root = tmp_path_factory.mktemp("scene")
    generate_demo_scene(root, n_train=3, n_test=1, size=(32, 32), seed=1, n_points=300)
    return root


@pytest.fixture(scope="module")
def user_run(tiny_scene, tmp_path_factory):
    """A 2-step run of a user's spec: 3DGS under another primitive name, in the user's folder."""
    home = tmp_path_factory.mktemp("mine")
    spec = home / "my_gauss.xpr"
    text = (ROOT / "specs" / "3dgs.xpr").read_text(encoding="utf-8")
    spec.write_text(text.replace("primitive Gaussian3D", "primitive MyGauss"), encoding="utf-8")
    out = home / "run"
    argv = ["train", "--data", str(tiny_scene), "--out", str(out), "--steps", "2"]
    assert main([*argv, "--eval-every", "0", "--spec", str(spec)]) == 0
    return spec, out


def _render(scene, data, out, *extra) -> int:
    return main(["render", str(scene), "--data", str(data), "-o", str(out), *extra])


def test_render_of_a_user_spec_run_finds_the_spec(user_run, tiny_scene, tmp_path, capsys):
    spec, run = user_run
    _, meta = load_checkpoint(run / "checkpoint.npz")
    assert meta["spec_path"] == str(spec) and os.path.isabs(meta["spec_path"])
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["spec_path"] == str(spec)
    capsys.readouterr()
    assert _render(run, tiny_scene, tmp_path / "a.npy") == 0
    assert capsys.readouterr().err == (
        f"note: {run / 'checkpoint.npz'}: rendering with the spec the run recorded, {spec}\n"
    )
    assert _render(run, tiny_scene, tmp_path / "b.npy", "--spec", str(spec)) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))


def _copy_run(run, tmp_path, **meta_changes):
    """The run's checkpoint alone, its metadata changed (a checkpoint names its own record)."""
    params, meta = load_checkpoint(run / "checkpoint.npz")
    out = tmp_path / "copy"
    out.mkdir(parents=True)
    save_checkpoint(out / "scene.npz", params, {**meta, **meta_changes})
    return out / "scene.npz"


def test_a_changed_or_missing_recorded_spec_is_said(user_run, tiny_scene, tmp_path, capsys):
    spec, run = user_run
    moved = tmp_path / "elsewhere.xpr"
    shutil.copy(spec, moved)
    edited = tmp_path / "edited.xpr"
    edited.write_text(spec.read_text().replace("1 / 255", "2 / 255"), encoding="utf-8")
    cases = {
        str(moved): None,  # the same text elsewhere: found
        str(edited): f"(it recorded {edited}, whose text has changed since)",
        str(tmp_path / "gone.xpr"): f"(it recorded {tmp_path / 'gone.xpr'}, which is not there)",
        str(tmp_path): f"(it recorded {tmp_path}, which cannot be read as a spec)",
    }
    for k, (path, said) in enumerate(cases.items()):
        ckpt = _copy_run(run, tmp_path / f"c{k}", spec_path=path)
        capsys.readouterr()
        code = _render(ckpt, tiny_scene, tmp_path / "v.npy")
        err = capsys.readouterr().err
        if said is None:
            assert code == 0 and "rendering with the spec the run recorded" in err, err
        else:
            assert code == 1 and said in err and "give its .xpr file with --spec" in err, err


def test_a_recorded_path_is_not_quoted_unless_it_is_the_spec(user_run, tiny_scene, tmp_path,
                                                              capsys):  # fmt: skip
    """A hostile record naming any file: it is read as a spec only, its digest does not match,
    and no line of it reaches the message."""
    spec, run = user_run
    secret = tmp_path / "secret.txt"
    secret.write_text("password = hunter2\n", encoding="utf-8")
    ckpt = _copy_run(run, tmp_path, spec_path=str(secret))
    capsys.readouterr()
    assert _render(ckpt, tiny_scene, tmp_path / "v.npy") == 1
    err = capsys.readouterr().err
    assert "hunter2" not in err and "whose text has changed since" in err
    bad = _copy_run(run, tmp_path / "rel", spec_path="relative/my.xpr")
    assert _render(bad, tiny_scene, tmp_path / "v.npy") == 1
    assert "'spec_path' must be the absolute path of the spec file" in capsys.readouterr().err


def test_a_recorded_spec_of_another_primitive_or_a_fifo_is_refused(user_run, tiny_scene,
                                                                   tmp_path, capsys):  # fmt: skip
    """The file's digest matches but the record names another primitive: refused, not rendered
    as if it were that one. A FIFO named by the record is not opened (it would block)."""
    spec, run = user_run
    other = _copy_run(run, tmp_path / "other", method="Other")
    capsys.readouterr()
    assert _render(other, tiny_scene, tmp_path / "v.npy") == 1
    assert (f"the spec the run recorded, {spec}, is not the spec 'Other' (sha256 "
            in capsys.readouterr().err)  # fmt: skip
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)
    ckpt = _copy_run(run, tmp_path / "fifo", spec_path=str(fifo))
    assert _render(ckpt, tiny_scene, tmp_path / "v.npy") == 1
    assert f"(it recorded {fifo}, which cannot be read as a spec)" in capsys.readouterr().err


def test_render_never_writes_over_the_recorded_spec(user_run, tiny_scene, tmp_path, capsys):
    """The recorded spec is an input like --spec: -o onto it is refused, and it is unchanged."""
    spec, run = user_run
    before = spec.read_bytes()
    link = tmp_path / "out.npy"
    os.symlink(spec, link)  # (-o must end in .png or .npy: a link with that name to the spec)
    assert _render(run, tiny_scene, link) == 1
    assert "is the spec being rendered" in capsys.readouterr().err
    assert spec.read_bytes() == before
