"""The command line as operators install it: `pip install` of the built wheel into a
fresh venv gives `eks-node-drainer` and the kubectl plugin `kubectl-drainer`, and
both drain and release a node of the real control plane, run as a person runs them
(the plugin through the real kubectl)."""

from __future__ import annotations

import os
import shlex
import subprocess
import zipfile
from pathlib import Path

import pytest
from support.wheel import Installed, installed

from drainer import __version__
from drainer.k8s.cordon import EXCLUDE_LB_LABEL
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on

from .conftest import place_guarded

# The wheel is judged, not the backend: one run, on the real control plane.
REAL = pytest.mark.parametrize("backend", ["real"])


@pytest.fixture(scope="module")
def wheel() -> Installed:
    return installed()


def _run(
    argv: list[str], bin_dir: Path, kubectl: Path, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """As a person runs it: the venv's bin and kubectl on PATH, no PYTHONPATH, from a
    directory that is not the clone (so nothing imports from the sources)."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTHON", "VIRTUAL_ENV"))
    }
    env["PATH"] = os.pathsep.join([str(bin_dir), str(kubectl.parent), "/usr/bin", "/bin"])
    env["HOME"] = str(cwd)
    return subprocess.run(
        argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=300, check=False
    )


def test_wheel__two_commands__one_version__no_test_code(wheel: Installed) -> None:
    with zipfile.ZipFile(wheel.wheel) as built:
        names = built.namelist()
        entry_points = built.read(
            f"eks_node_drainer-{__version__}.dist-info/entry_points.txt"
        ).decode()
    assert wheel.wheel.name == f"eks_node_drainer-{__version__}-py3-none-any.whl"
    assert "drainer/cli/main.py" in names and "drainer/handler.py" in names
    assert not [
        n for n in names if n.split("/")[0] in {"tests", "kubesim", "awssim", "testbed", "demo"}
    ]
    assert "eks-node-drainer = drainer.cli.main:command" in entry_points
    assert "kubectl-drainer = drainer.cli.main:kubectl_plugin" in entry_points
    for command in ("eks-node-drainer", "kubectl-drainer"):
        assert os.access(wheel.bin / command, os.X_OK), command


@REAL
def test_installed_commands__drain_and_release__printed_undo_works_as_shown(
    world: World, wheel: Installed, kubectl_binary: Path, tmp_path: Path
) -> None:
    node = world.nodes[world.instance_ids[0]]
    place_on(world, node, [w.deployment("web", 2)])
    access = ["--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"]

    version = _run(["eks-node-drainer", "--version"], wheel.bin, kubectl_binary, tmp_path)
    assert version.stdout.strip() == f"eks-node-drainer {__version__}", version

    drained = _run(
        ["eks-node-drainer", "drain", node, "--ignore-daemonsets", *access],
        wheel.bin, kubectl_binary, tmp_path,
    )  # fmt: skip
    assert drained.returncode == 0, drained.stdout + drained.stderr
    assert [
        p for p in pods_on(world.cluster, node) if p["metadata"]["name"].startswith("web")
    ] == []
    assert world.cluster.get("Node", node)["spec"].get("unschedulable") is True

    released = _run(
        [str(kubectl_binary), "drainer", "release", node, *access],
        wheel.bin, kubectl_binary, tmp_path,
    )  # fmt: skip
    assert released.returncode == 0, released.stdout + released.stderr
    assert f"node {node} released: uncordoned" in released.stdout
    found = world.cluster.get("Node", node)
    assert not found["spec"].get("unschedulable")
    assert EXCLUDE_LB_LABEL not in (found["metadata"].get("labels") or {})


@REAL
def test_kubectl_plugin__drain_times_out__the_undo_it_prints_is_a_kubectl_command_that_works(
    world: World, wheel: Installed, kubectl_binary: Path, tmp_path: Path
) -> None:
    node = place_guarded(world, 1)
    access = ["--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"]

    drained = _run(
        [str(kubectl_binary), "drainer", "drain", node, "--ignore-daemonsets",
         "--timeout", "2", *access],
        wheel.bin, kubectl_binary, tmp_path,
    )  # fmt: skip

    assert drained.returncode == 1, drained.stdout + drained.stderr
    undo = next(
        (line for line in drained.stdout.splitlines() if "to undo: " in line), drained.stdout
    )
    words = shlex.split(undo.split("to undo: ", 1)[1])
    assert words[:3] == ["kubectl", "drainer", "release"], undo
    released = _run(words, wheel.bin, kubectl_binary, tmp_path)  # exactly as printed
    assert released.returncode == 0, released.stdout + released.stderr
    assert not world.cluster.get("Node", node)["spec"].get("unschedulable")
