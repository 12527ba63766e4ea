"""Multi-device rendering on 4 simulated CPU devices equals the single-device result to 1e-5.

XLA fixes the device count when JAX starts, so the check runs in a fresh subprocess.
"""

import os
import subprocess
import sys

from conftest import ROOT


def test_four_simulated_devices_match_one(tmp_path):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "distributed_check.py"),
            str(ROOT / "specs" / "3dgs.xpr"),
            str(tmp_path / "scene"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "distributed OK" in proc.stdout
    assert "distributed training OK" in proc.stdout
    assert "distributed capacity OK" in proc.stdout
