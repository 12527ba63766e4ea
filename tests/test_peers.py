"""benchmarks/peers.py, the side-by-side harness of xprc, splax and jax-gs: its quick run without
the peers (xprc's row, and a "not installed" row saying how to install each peer), its rows for a
peer that differs by a known amount, has NaN gradients or raises, and the conversions of the
Gaussians and the camera into each peer's conventions (as their sources define them)."""

from __future__ import annotations

import json
import math
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT, import_file

from xprc.conventions import SH_C0


@pytest.fixture(scope="module")
def peers():
    return import_file(ROOT / "benchmarks" / "peers.py", "bench_peers")


def _scene(peers, n=40, h=8, w=10, seed=0):
    rng = np.random.default_rng(seed)
    colour = rng.uniform(0.05, 0.95, (n, 3))
    colour[0] = [0.0, 1.0, 0.5]  # a channel at 0 and one at 1: clipped for splax's sigmoid
    sh = np.zeros((n, 16, 3), np.float32)
    sh[:, 0] = (colour - 0.5) / SH_C0
    viewmat = np.eye(4, dtype=np.float32)
    viewmat[:3, 3] = [0.1, -0.2, 0.3]
    k = np.array([[30.0, 0, 5.3], [0, 31.0, 3.9], [0, 0, 1]], np.float32)
    return peers.Scene(
        means=rng.normal(0, 1, (n, 3)).astype(np.float32) + np.float32([0, 0, 4]),
        quats=rng.normal(0, 1, (n, 4)).astype(np.float32),
        log_scales=np.log(rng.uniform(0.05, 0.2, (n, 3))).astype(np.float32),
        logit_opacities=rng.normal(0, 1, n).astype(np.float32),
        sh=sh, viewmat=viewmat, K=k, width=w, height=h,
    )  # fmt: skip


def test_quick_run_without_the_peers(peers, tmp_path, monkeypatch, capsys):
    """No peer importable: xprc's row is measured, each peer's row says it is not installed and
    how to install it; nothing raises."""
    for name in ("splax", "jax_gs"):
        monkeypatch.setitem(sys.modules, name, None)  # an import of it fails: not installed
    out = tmp_path / "peers.json"
    data = peers.main(["--quick", "--out", str(out)])
    assert json.loads(out.read_text()) == data
    rows = {r["renderer"]: r for r in data["rows"]}
    assert list(rows) == ["xprc", "splax", "jax-gs", "jax-gs tpu rasteriser"]
    xprc = rows["xprc"]
    assert xprc["status"] == "ok" and xprc["forward ms"] > 0 and xprc["fwd+bwd ms"] > 0
    assert xprc["gradient nonfinite"] == 0
    assert xprc["gradient entries"] == 800 * (3 + 4 + 3 + 1 + 48)  # means, quats, scales, ...
    assert xprc["image"] == [83, 128, 3] and xprc["image nonfinite"] == 0
    assert "0 entries dropped" in xprc["notes"][0]
    assert rows["splax"]["status"].startswith("not installed: ")
    assert "git clone https://github.com/maurock/splax" in rows["splax"]["status"]
    for name in ("jax-gs", "jax-gs tpu rasteriser"):
        assert rows[name]["status"].startswith("not installed: ")
        assert "git clone https://github.com/ghif/jax-gs" in rows[name]["status"]
        assert "forward ms" not in rows[name]
    printed = capsys.readouterr().out
    assert "| xprc | " in printed and "| reference | finite | ok |" in printed
    assert printed.count("| not installed: ") == 3


def test_rows_of_a_peer_that_differs_has_nan_gradients_or_raises(peers):
    """The PSNR against the reference is the one of the known perturbation, computed here
    independently; NaN gradients are counted; a failure is a row with its first line."""
    scene = _scene(peers)
    rng = np.random.default_rng(1)
    reference = rng.uniform(0, 1, (scene.height, scene.width, 3)).astype(np.float32)
    delta = np.zeros_like(reference)
    delta[: scene.height // 2, : scene.width // 2] = 0.05  # a quarter of the pixels
    params = {"x": jnp.ones(3, jnp.float32)}

    def fake(image_of):
        return lambda s: (params, image_of, "fake 1.0", ["a fake peer"])

    shifted = fake(lambda p: jnp.asarray(reference + delta) + 0 * jnp.sum(p["x"]))
    row = peers.measure("shifted", shifted, scene, reference, repeat=1)
    assert row["status"] == "ok" and row["gradient nonfinite"] == 0
    assert row["psnr db"] == pytest.approx(-10 * math.log10(0.05**2 / 4), abs=1e-3)  # 32.04
    assert row["max abs diff"] == pytest.approx(0.05, abs=1e-6)

    nan_grad = fake(lambda p: jnp.asarray(reference) + 0 * jnp.sum(jnp.sqrt(p["x"] - p["x"])))
    row = peers.measure("nan", nan_grad, scene, reference, repeat=1)
    assert row["psnr db"] == math.inf
    assert (row["gradient nonfinite"], row["gradient entries"]) == (3, 3)
    assert peers._gradients(row) == "3 of 3 NaN/inf"

    nan_image = fake(lambda p: jnp.asarray(reference).at[0, 0, 1].set(jnp.nan) + jnp.sum(p["x"]))
    row = peers.measure("nan image", nan_image, scene, reference, repeat=1)
    assert (row["image nonfinite"], row["psnr db"]) == (1, None)
    assert row["notes"][-1] == "1 of 240 image values NaN/inf"
    assert peers._psnr_cell(row) == "NaN image (1 values)" and peers._gradients(row) == "finite"

    def raises(s):
        raise RuntimeError("kernel failed\nmore lines")

    assert peers.measure("r", raises, scene, reference, 1)["status"] == (
        "error: RuntimeError: kernel failed"
    )

    def bad_forward(p):
        raise ValueError("no TPU here")

    row = peers.measure("f", fake(bad_forward), scene, reference, 1)
    assert row["status"] == "error (forward): ValueError: no TPU here"

    def missing(s):
        raise peers.PeerMissing("x cannot be imported: pip install x")

    row = peers.measure("m", missing, scene, reference, 1)
    assert row["status"] == "not installed: x cannot be imported: pip install x"


def test_conversion_to_splax(peers):
    """maurock/splax: colour = sigmoid(SH_C0 * sh[0] + ...), sh flat [N, 48] read as [N, 16, 3],
    opacity logits [N, 1], log scales, (w, x, y, z) quaternions; focal lengths only."""
    scene = _scene(peers)
    arrays, clipped = peers.splax_arrays(scene)
    n = scene.means.shape[0]
    sh = arrays["sh"].reshape(n, 16, 3).astype(np.float64)
    colour = 1 / (1 + np.exp(-SH_C0 * sh[:, 0]))  # splax's colour of degree 0
    want = SH_C0 * scene.sh[:, 0].astype(np.float64) + 0.5  # 3DGS's
    np.testing.assert_allclose(colour, want, atol=2e-6)
    assert clipped == 2 and not sh[:, 1:].any()
    assert arrays["opacity"].shape == (n, 1)
    np.testing.assert_array_equal(arrays["opacity"][:, 0], scene.logit_opacities)
    np.testing.assert_array_equal(arrays["quaternion"], scene.quats)
    np.testing.assert_array_equal(arrays["log_scale"], scene.log_scales)
    cam = peers.splax_camera(scene)
    assert (cam["focal_x"], cam["focal_y"]) == (30.0, 31.0)
    assert (cam["img_width"], cam["img_height"]) == (10, 8)
    np.testing.assert_array_equal(cam["w2c"], scene.viewmat)
    sh_view = scene.sh.copy()
    sh_view[3, 2, 1] = 0.1
    with pytest.raises(ValueError, match="1 primitives with SH beyond degree 0"):
        peers.splax_arrays(peers.dataclasses.replace(scene, sh=sh_view))


def test_conversion_to_jax_gs(peers):
    """jax-gs: opacity logits [N, 1], the rest as xprc stores it; fx, fy, cx, cy from K."""
    scene = _scene(peers)
    arrays = peers.jax_gs_arrays(scene)
    assert arrays["opacities"].shape == (40, 1)
    np.testing.assert_array_equal(arrays["opacities"][:, 0], scene.logit_opacities)
    for name, want in (("means", scene.means), ("scales", scene.log_scales),
                       ("quaternions", scene.quats), ("sh_coeffs", scene.sh)):  # fmt: skip
        np.testing.assert_array_equal(arrays[name], want)
    cam = peers.jax_gs_camera(scene)
    assert [cam[k] for k in ("W", "H", "fx", "fy")] == [10, 8, 30.0, 31.0]
    assert (cam["cx"], cam["cy"]) == pytest.approx((5.3, 3.9))
    np.testing.assert_array_equal(cam["W2C"], scene.viewmat)
    assert peers.sh_degree(scene) == 3


def test_finding_a_peer(peers, tmp_path, monkeypatch):
    """A path without the package, a package whose dependency is missing, and a clone whose
    package lives under src/ (as maurock/splax's does)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(peers.PeerMissing, match="no peerpkg_a/ package in"):
        peers.import_peer("peerpkg_a", str(tmp_path), "clone it")
    (tmp_path / "src" / "peerpkg_a").mkdir(parents=True)
    (tmp_path / "src" / "peerpkg_a" / "__init__.py").write_text("VALUE = 7\n")
    monkeypatch.delitem(sys.modules, "peerpkg_a", raising=False)
    assert peers.import_peer("peerpkg_a", str(tmp_path), "clone it").VALUE == 7
    monkeypatch.delitem(sys.modules, "peerpkg_a")
    (tmp_path / "peerpkg_b").mkdir()
    (tmp_path / "peerpkg_b" / "__init__.py").write_text("import no_such_dependency_xyz\n")
    with pytest.raises(peers.PeerMissing, match=r"\(it needs no_such_dependency_xyz\): clone"):
        peers.import_peer("peerpkg_b", str(tmp_path), "clone it")


def test_clip_keywords_for_older_peers(peers):
    """jnp.clip takes a_min/a_max inside the block (splax calls it so) and is restored after."""
    original = jnp.clip
    x = jnp.asarray([-1.0, 0.5, 3.0], jnp.float32)
    with peers.clip_keywords():
        np.testing.assert_array_equal(jnp.clip(x, a_min=0.0, a_max=1.0), [0.0, 0.5, 1.0])
        np.testing.assert_array_equal(jnp.clip(x, a_min=0.25), [0.25, 0.5, 3.0])
    assert jnp.clip is original


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--repeat", "0"], "--repeat 0: expected a positive number"),
        (["--num", "0"], "--num 0: expected a positive number"),
        (["--scale", "-1"], "--scale -1.0: expected a positive number"),
    ],
)
def test_options_refuse_sizes_that_measure_nothing(peers, argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        peers.options(argv)
    assert stop.value.code == 2 and capsys.readouterr().err.strip().endswith(message)


def test_tpu_default_dots_round_only_default_precision_products(peers):
    """Inside the block a default-precision product is the float32 product of the operands
    rounded to bfloat16 (ml_dtypes' rounding, not JAX's), one asking for HIGHEST is exact;
    after it, products are float32 again."""
    import jax
    import ml_dtypes

    rng = np.random.default_rng(3)
    a = rng.normal(size=(5, 7)).astype(np.float32)
    b = rng.normal(size=(7, 3)).astype(np.float32)
    r = lambda x: x.astype(ml_dtypes.bfloat16).astype(np.float64)  # noqa: E731
    exact = a.astype(np.float64) @ b.astype(np.float64)
    jax.clear_caches()  # jnp.matmul is jitted: trace it afresh inside the block
    with peers.tpu_default_dots():
        rounded = np.asarray(jnp.asarray(a) @ jnp.asarray(b))
        dot = np.asarray(jnp.dot(a, b))
        highest = np.asarray(jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST))
    np.testing.assert_allclose(rounded, r(a) @ r(b), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dot, r(a) @ r(b), rtol=1e-5, atol=1e-5)
    assert np.abs(rounded - exact).max() > 1e-3  # bfloat16 keeps 8 bits: visibly off
    np.testing.assert_allclose(highest, exact, rtol=1e-5, atol=1e-5)
    jax.clear_caches()
    np.testing.assert_allclose(np.asarray(jnp.asarray(a) @ jnp.asarray(b)), exact, atol=1e-5)


def test_only_names_rows_that_exist(peers):
    with pytest.raises(SystemExit, match=r"--only jax_gs: no row named jax_gs \(rows: xprc, "):
        peers.main(["--quick", "--only", "jax_gs"], builders={"xprc": None, "jax-gs": None})
