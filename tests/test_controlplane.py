"""`python -m testbed controlplane`: a real control plane for a person, in one command.

It must come up, answer kubectl as `admin`, hold the `drainer` identity to what RBAC
grants it, and leave no process or file behind on Ctrl-C or SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kubesim.testing import eventually
from testbed.cluster import ApiClient
from testbed.controlplane import binaries

ROOT = Path(__file__).resolve().parent.parent


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


@pytest.mark.real_backend
@pytest.mark.parametrize("stop_with", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_controlplane_command__kubectl_works__nothing_left_after_stop(
    tmp_path: Path, kubectl_binary: Path, stop_with: signal.Signals
) -> None:
    binaries()  # built by `make test` already; a plain pytest run builds it here
    config = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [sys.executable, "-m", "testbed", "controlplane", "--kubeconfig", str(config)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            lines.append(line)
            if "ready in" in line or "error" in line:
                break
        printed = "".join(lines)
        assert re.search(r"Kubernetes v1\.\d+\.\d+ at https://127\.0\.0\.1:\d+", printed), printed
        children = _children_of(process.pid)
        assert len(children) == 5, "etcd, apiserver, controller-manager, scheduler, kwok"
        home = tmp_path / "home"
        home.mkdir()

        def kubectl_run(*args: str, context: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [str(kubectl_binary), "--kubeconfig", str(config), "--context", context, *args],
                capture_output=True,
                text=True,
                env={**os.environ, "HOME": str(home)},
                timeout=60,
                check=False,
            )

        nodes = kubectl_run("get", "nodes", context="admin")
        assert nodes.returncode == 0, nodes.stderr
        denied = kubectl_run("get", "pods", "-A", context="drainer")
        assert denied.returncode != 0
        assert 'User "drainer" cannot list resource "pods"' in denied.stderr
        directories = {
            p
            for base in (Path("/dev/shm"), Path(tempfile.gettempdir()))
            for p in base.glob("eks-drainer-cp-*")
            if (p / "owner.pid").exists()
        }
        ours = {p for p in directories if (p / "owner.pid").read_text() == str(process.pid)}
        assert len(ours) == 1

        process.send_signal(stop_with)
        assert process.wait(30) == 0
        eventually(
            lambda: not any(Path(f"/proc/{pid}").exists() for pid in children),
            5,
            0.1,
            what="every component gone with the command",
        )
        assert not [p for p in ours if p.exists()], "its files are gone"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.real_backend
def test_restart_from_a_thread_that_ends__components_serve_again_and_keep_the_state() -> None:
    """ControlPlane.restart, as the chaos runner calls it: from short-lived threads,
    two components at once. The restarted processes must outlive those threads
    (PR_SET_PDEATHSIG fires when the thread that started a child ends) and etcd keeps
    what was written before."""
    import threading

    from testbed.controlplane import ControlPlane

    with ControlPlane(cluster_name="restart", speed=20) as plane:
        client = ApiClient(plane.url, plane.ca_pem, plane.admin_token)
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kept"}})
        errors: list[BaseException] = []

        def restart(name: str) -> None:
            try:
                plane.restart(name, down=0.3)
            except BaseException as e:
                errors.append(e)

        threads = [
            threading.Thread(target=restart, args=(name,))
            for name in ("kube-apiserver", "kube-controller-manager")
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        time.sleep(1.0)  # long enough for a death signal to have landed
        plane.check()  # every component alive
        assert client.find("Namespace", "kept") is not None
        assert sorted(name for name, _ in plane.restarts) == [
            "kube-apiserver",
            "kube-controller-manager",
        ]
        with pytest.raises(ValueError, match="etcd keeps the state"):
            plane.restart("etcd")
