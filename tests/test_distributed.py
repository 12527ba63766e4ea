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


def _two_processes(delays, timeout):
    """Run tests/multi_host_check.py as processes 0 and 1 of a run on a free loopback port, the
    second sleeping delays[1] s before leaving; (returncode, stderr) of process 0, and of
    process 1 when it ended within a minute after process 0."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for i, delay in enumerate(delays):
        env = dict(
            os.environ,
            JAX_PLATFORMS="cpu",
            XPRC_COORDINATOR=f"127.0.0.1:{port}",
            XPRC_NUM_PROCESSES="2",
            XPRC_PROCESS_ID=str(i),
            XPRC_COORDINATOR_TIMEOUT=str(timeout),
        )
        script = str(ROOT / "tests" / "multi_host_check.py")
        procs.append(
            subprocess.Popen(
                [sys.executable, script, str(delay)],
                env=env,
                cwd=ROOT,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )  # fmt: skip
        )
    try:
        out0, err0 = procs[0].communicate(timeout=120)
        try:
            out1, err1 = procs[1].communicate(timeout=60)
        except subprocess.TimeoutExpired:
            out1, err1 = None, None
        return (procs[0].returncode, out0 + err0), (
            procs[1].returncode,
            (out1 or "") + (err1 or ""),
        )
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_multi_host_processes_leave_together():
    """A normal end: both processes pass the leaving barrier and exit 0 (this passed before
    `leave` too: it guards the normal case, the next test the fix)."""
    (rc0, log0), (rc1, log1) = _two_processes((0, 1), timeout=30)
    assert (rc0, rc1) == (0, 0), log0 + log1
    assert "joined" in log0 and "joined" in log1


def test_multi_host_process_0_says_a_peer_did_not_finish():
    """Process 0 ending while process 1 runs on past XPRC_COORDINATOR_TIMEOUT (stopped early,
    failed, killed): jax's shutdown barrier failed in a background thread and aborted process 0
    (SIGABRT, exit status 134, only jax's log lines); now process 0 says so and exits 1."""
    (rc0, log0), _ = _two_processes((0, 30), timeout=3)
    assert rc0 == 1, (rc0, log0)
    assert (
        "error: multi-host run: process 0 of 2 ended, but not all the others did within 3 s "
        "(XPRC_COORDINATOR_TIMEOUT; one stopped early, failed or was killed?): exiting without "
        "them (DEADLINE_EXCEEDED: Barrier timed out)" in log0
    ), log0
    assert "Terminating process" not in log0, log0


def test_multi_host_step_failing_with_a_peer_gone_is_a_message(tmp_path, capsys, monkeypatch):
    """A peer killed mid-run made process 0's next step raise JaxRuntimeError ('Gloo
    all-reduce failed: ... Connection reset by peer'), a traceback; in a multi-host run it is
    a one-line error (seen with two `xprc train` on 127.0.0.1, process 1 killed)."""
    import jax

    import xprc.cli.train
    import xprc.distributed
    from xprc import cli

    gone = "UNKNOWN: Gloo all-reduce failed: Read error [127.0.0.1]:1: Connection reset by peer"

    def join(devices):
        xprc.distributed._JOINED.update(process_id=0, processes=2, timeout=5)
        return 2

    def step(args, devices):
        raise jax.errors.JaxRuntimeError(gone + "\n(details)")

    left = []
    monkeypatch.setattr(xprc.distributed, "setup_devices", join)
    monkeypatch.setattr(xprc.distributed, "leave", lambda status: left.append(status) or status)
    monkeypatch.setattr(xprc.cli.train, "train_on", step)
    argv = ["train", "--data", str(tmp_path), "--out", str(tmp_path / "run")]
    try:
        assert cli.main(argv) == 1
    finally:
        xprc.distributed._JOINED.clear()
    assert capsys.readouterr().err.splitlines() == [
        "error: multi-host run: process 0 of 2 stopped: a computation with the other processes "
        f"failed (one stopped, failed or was killed?): {gone}"
    ]
    assert left == [1]
    # outside a multi-host run, the same error is not said to be about other processes
    assert xprc.distributed.collective_error(jax.errors.JaxRuntimeError(gone)) is None
