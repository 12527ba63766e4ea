"""Training images on the device (xprc.train.data): 8-bit files stay uint8, bit for bit the
float32 path; other images stay float32; the memory check counts the real bytes."""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import pytest
from test_train import CAPACITY, METHOD, _tiny_scene

from xprc import train as tr
from xprc.train import run as train_run
from xprc.train.config import TrainError
from xprc.train.data import as_8bit, check_image_memory, float_images, stack_views


def _loaded(k):
    """What the loaders make of 8-bit codes `k` (datasets.to_view_image), written out here."""
    return np.asarray(k, np.uint8).astype(np.float32) / np.float32(255.0)


def _eight_bit(dataset):
    """`dataset` with each image rounded to 8 bits as a file would hold it, then loaded."""
    views = tuple(
        dataclasses.replace(v, image=_loaded(np.rint(np.clip(v.image, 0, 1) * 255.0)))
        for v in dataset.views
    )
    return dataclasses.replace(dataset, views=views)


@pytest.fixture(scope="module")
def scene8():
    train, test = _tiny_scene()
    return _eight_bit(train), _eight_bit(test)


def test_as_8bit_takes_exact_codes_only():
    codes = np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(3, axis=-1)
    image = _loaded(codes)
    got = as_8bit(image)
    assert got is not None and got.dtype == np.uint8
    np.testing.assert_array_equal(got, codes)
    # anything that is not exactly some k/255 in float32 stays as it is
    one_ulp = image.copy()
    one_ulp[3, 4, 1] = np.nextafter(one_ulp[3, 4, 1], np.float32(1.0))
    grey16 = np.full((2, 2, 3), 1000 / 65535, np.float32)  # a 16-bit value
    for odd in (one_ulp, grey16, np.full((2, 2, 3), 0.5, np.float32), -image, image * 1.5,
                np.full((2, 2, 3), np.nan, np.float32), image.astype(np.float64)):  # fmt: skip
        assert as_8bit(odd) is None
    # a 16-bit value that is k/255 exactly (k x 257 / 65535) is the same float32: kept as uint8
    assert as_8bit(np.full((1, 1, 3), np.float32(51 * 257) / np.float32(65535.0))) is not None


def test_8bit_views_are_stacked_as_uint8_and_read_back_exactly(scene8):
    train, _ = scene8
    data = stack_views(train.views, "training")
    assert data["images"].dtype == np.uint8
    want = np.stack([v.image for v in train.views])
    np.testing.assert_array_equal(np.asarray(float_images(data["images"])), want)  # on device
    np.testing.assert_array_equal(float_images(np.asarray(data["images"])), want)  # NumPy


def test_a_float_image_keeps_float32_and_its_values(scene8):
    """One view that is not 8-bit (a float render) keeps the whole set float32: nothing is
    rounded to 8 bits in silence."""
    train, _ = scene8
    raw, _ = _tiny_scene()
    views = (raw.views[0], *train.views[1:])
    assert as_8bit(raw.views[0].image) is None
    data = stack_views(views, "training")
    assert data["images"].dtype == np.float32
    np.testing.assert_array_equal(np.asarray(data["images"]), np.stack([v.image for v in views]))


def test_memory_check_counts_uint8_as_one_byte_a_value():
    views = [argparse.Namespace(width=1296, height=840)] * 150
    sets = [views[:130], views[130:]]
    need32 = 150 * 1296 * 840 * 12  # float32 RGB
    need8 = need32 // 4
    check_image_memory(sets, False, free=(2 * need8, "x"), itemsizes=[1, 1])  # fits as uint8
    with pytest.raises(TrainError) as e:
        check_image_memory(sets, False, free=(2 * need8, "free on TPU v5e 0"), itemsizes=[4, 4])
    assert "images of 1296x840 need 1.8 GiB on the device as float32, more than 50% of the " \
        "934.4 MiB free" in str(e.value)  # fmt: skip
    with pytest.raises(TrainError) as e:
        check_image_memory(sets, False, free=(need8, "free on TPU v5e 0"), itemsizes=[1, 1])
    assert "need 467.2 MiB on the device as uint8, more than 50% of the 467.2 MiB free" in str(
        e.value
    )
    assert "--images images_2 " in str(e.value) and "--downscale 2 " in str(e.value)
    with pytest.raises(TrainError) as e:
        check_image_memory(sets, False, free=(need8, "x"), itemsizes=[1, 4])  # float32 test set
    assert f"need {(130 * 3 + 20 * 12) * 1296 * 840 / 2**20:.1f} MiB on the device as uint8 " \
        "and float32," in str(e.value)  # fmt: skip
    alpha = 130 * 1296 * 840 * 4
    with pytest.raises(TrainError) as e:
        check_image_memory(sets, True, free=(need8, "x"), itemsizes=[1, 1])
    assert f"need {(need8 + alpha) / 2**20:,.1f} MiB on the device as uint8 (alpha float32)," \
        in str(e.value)  # fmt: skip


def _config():
    return tr.TrainConfig(
        steps=4, capacity=CAPACITY, refine_every=0, eval_every=2, checkpoint_every=0,
        log_every=1, progress=False, lr={"sh": 1e-2},
    )  # fmt: skip


def test_uint8_images_train_bit_for_bit_as_float32(scene8, tmp_path, monkeypatch):
    """The same 8-bit dataset trained from uint8 images and, with the detection switched off,
    from float32 ones: the same losses, evaluations (test images read the same way) and
    parameters, bit for bit."""
    stacked = []
    real = train_run.stack_views

    def recording(views, what, *args, **kw):
        out = real(views, what, *args, **kw)
        stacked.append((what, out["images"].dtype))
        return out

    monkeypatch.setattr(train_run, "stack_views", recording)
    eight = tr.train(METHOD, *scene8, tmp_path / "u8", _config())
    assert stacked == [("training", np.uint8), ("test", np.uint8)]
    monkeypatch.setattr("xprc.train.data.as_8bit", lambda image: None)
    plain = tr.train(METHOD, *scene8, tmp_path / "f32", _config())
    assert stacked[2:] == [("training", np.float32), ("test", np.float32)]
    assert [h["loss"] for h in eight.history] == [h["loss"] for h in plain.history]
    assert len(eight.history) == 4
    for a, b in zip(eight.evals, plain.evals, strict=True):
        assert (a["psnr"], a["ssim"]) == (b["psnr"], b["ssim"])
    for name, value in plain.params.items():
        np.testing.assert_array_equal(eight.params[name], value, err_msg=name)
    assert (tmp_path / "u8" / "sheet.png").is_file()  # the outputs read the uint8 test images
