"""`python -m drainer` as a person runs it, on both backends: a real process in a
real terminal (a pty), Ctrl-C (or SIGTERM, SIGHUP, the terminal closing) in the
middle of a drain that a budget holds up, and the undo command it prints, which
leaves the node as it was before the drain."""

from __future__ import annotations

import os
import pty
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from drainer.cli.main import python_m_prog
from drainer.k8s.cordon import EXCLUDE_LB_LABEL, PROGRESS_ANNOTATION, progress_of
from testbed import World
from testbed.world import node_tainted, rbac_manifests, wait_until

from .conftest import place_guarded

ROOT = Path(__file__).resolve().parents[2]


class Terminal:
    """A command in a pseudo-terminal of its own, as in a person's shell: Ctrl-C typed
    on it reaches the command as the terminal's SIGINT; closing it, as SIGHUP.
    `stderr`: a descriptor for the command's stderr instead of the terminal."""

    def __init__(self, argv: list[str], env: dict[str, str], stderr: int | None = None) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: straight to exec
            os.chdir(ROOT)
            if stderr is not None:
                os.dup2(stderr, 2)
            os.execve(argv[0], argv, env)
        self.pid, self.fd = pid, fd
        self.output = b""
        self.status: int | None = None

    @property
    def text(self) -> str:
        return self.output.decode(errors="replace").replace("\r\n", "\n")

    def _read(self, timeout: float) -> bool:
        """Read what is there within `timeout`; False at the end of output."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the other side closed
            chunk = b""
        self.output += chunk
        return bool(chunk)

    def expect(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.text:
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                raise AssertionError(f"{text!r} not printed within {timeout} s:\n{self.text}")

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def hang_up(self) -> None:
        """Close the terminal, as a person closing its window: the command gets SIGHUP."""
        os.close(self.fd)
        self.fd = -1

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.fd >= 0 and self._read(deadline - time.monotonic()):
            if time.monotonic() >= deadline:
                break
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                return self.status
            time.sleep(0.02)
        raise AssertionError(f"still running after {timeout} s:\n{self.text}")

    def close(self) -> None:
        if self.status is None:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        if self.fd >= 0:
            os.close(self.fd)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(tmp_path), TERM="xterm", PYTHONUNBUFFERED="1")
    return env


def _cli(world: World, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "drainer",
        *args,
        "--kubeconfig",
        str(world.cluster.kubeconfig),
        "--context",
        "drainer",
    ]


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=False)


def _state(world: World, node: str) -> dict[str, Any]:
    """What a drain changes on a node, and what a person sees of it."""
    found = world.cluster.get("Node", node)
    metadata = found["metadata"]
    return {
        "unschedulable": bool(found["spec"].get("unschedulable")),
        "labels": metadata.get("labels") or {},
        "drainer annotation": (metadata.get("annotations") or {}).get(PROGRESS_ANNOTATION),
        "unschedulable taint": node_tainted(world.cluster, node),
    }


def _phase(world: World, node: str) -> object:
    """The phase the node's progress record says the drain ended in."""
    return (progress_of(world.cluster.get("Node", node)) or {}).get("phase")


def _ctrl_c(terminal: Terminal) -> None:
    terminal.type(b"\x03")


def _kill(signum: int) -> Callable[[Terminal], None]:
    return lambda terminal: os.kill(terminal.pid, signum)


@pytest.mark.parametrize(
    ("stop", "name", "status"),
    [
        pytest.param(_ctrl_c, "Ctrl-C", 130, id="ctrl-c"),
        pytest.param(_kill(signal.SIGTERM), "SIGTERM", 143, id="SIGTERM"),  # a CI job's timeout
        pytest.param(_kill(signal.SIGHUP), "SIGHUP", 129, id="SIGHUP"),
    ],
)
def test_stopped_during_budget_wait__128_plus_signal_within_2s__undo_restores_node(
    world: World, tmp_path: Path, stop: Callable[[Terminal], None], name: str, status: int
) -> None:
    node = world.nodes[world.instance_ids[0]]
    place_guarded(world, 1)
    before = _state(world, node)
    terminal = Terminal(_cli(world, "drain", "--node", node, "--ignore-daemonsets"), _env(tmp_path))
    try:
        terminal.expect("by PodDisruptionBudget default/guard", timeout=60)
        # The live status line, rewritten in place while the budget holds the pod.
        terminal.expect("\x1b[K", timeout=10)
        terminal.expect("waiting for 1 pod: default/guarded-", timeout=10)

        typed = time.monotonic()
        stop(terminal)
        terminal.expect("to undo: ", timeout=10)
        told = time.monotonic() - typed
        code = terminal.wait(timeout=10)
    finally:
        terminal.close()

    output = terminal.text
    assert code == status, output
    assert told < 2.0, f"{name} took {told:.2f} s to say the node's state:\n{output}"
    assert "Traceback" not in output
    assert f"interrupted by {name}: node {node} is cordoned" in output
    assert "1 pods left: default/guarded-" in output
    assert output.rstrip("\n").splitlines()[-1].startswith("to undo: "), "the last line"
    assert _state(world, node)["unschedulable"] is True
    assert _phase(world, node) == "interrupted"
    undo = next(line for line in output.splitlines() if line.startswith("to undo: "))
    words = shlex.split(undo.removeprefix("to undo: "))
    at = words.index("release")
    assert words[at : at + 3] == ["release", "--node", node], undo

    released = _run(words)  # as printed: it works where the person is

    assert released.returncode == 0, released.stderr
    assert "warning" not in released.stdout, "the interrupted drain said so on the node"
    assert f"node {node} released: uncordoned, removed label {EXCLUDE_LB_LABEL}" in (
        released.stdout
    )
    wait_until(lambda: _state(world, node) == before, timeout=20)

    again = _run(words)
    assert again.returncode == 0, again.stderr
    assert "nothing to undo" in again.stdout
    assert _state(world, node) == before


def test_terminal_closed_during_budget_wait__sighup__state_and_undo_on_stderr__exit_129(
    world: World, tmp_path: Path
) -> None:
    """The terminal goes (its window closed, an ssh connection lost): stdout is gone,
    stderr was sent to a file; what the node is left in, and its undo, are there."""
    node = world.nodes[world.instance_ids[0]]
    place_guarded(world, 1)
    errors = tmp_path / "stderr"
    with errors.open("wb") as file:
        argv = _cli(world, "drain", "--node", node, "--ignore-daemonsets")
        terminal = Terminal(argv, _env(tmp_path), stderr=file.fileno())
    try:
        terminal.expect("by PodDisruptionBudget default/guard", timeout=60)
        terminal.hang_up()
        code = terminal.wait(timeout=10)
    finally:
        terminal.close()

    text = errors.read_text()
    assert code == 129, text
    assert "Traceback" not in text and "Exception ignored" not in text, text
    assert f"interrupted by SIGHUP: node {node} is cordoned" in text
    assert text.splitlines()[-1].startswith(f"to undo: {python_m_prog()} release --node "), text
    assert _phase(world, node) == "interrupted"


def test_release__operator_label_and_cordon_before_drain__kept(
    world: World, tmp_path: Path
) -> None:
    node = world.nodes[world.instance_ids[0]]
    world.cluster.patch(
        "Node", node, {"metadata": {"labels": {EXCLUDE_LB_LABEL: "ops"}}, "spec": {}}
    )
    before = _state(world, node)
    drained = _run(_cli(world, "drain", "--node", node, "--ignore-daemonsets"))
    assert drained.returncode == 0, drained.stdout + drained.stderr

    released = _run(_cli(world, "release", "--node", node))

    assert released.returncode == 0, released.stderr
    assert f"label {EXCLUDE_LB_LABEL} set before the drain: kept" in released.stdout
    wait_until(lambda: _state(world, node) == before, timeout=20)
    assert _state(world, node)["labels"][EXCLUDE_LB_LABEL] == "ops"


def _without_node_patch() -> list[dict[str, Any]]:
    manifests = rbac_manifests()
    for document in manifests:
        if document["kind"] == "ClusterRole":
            for rule in document["rules"]:
                if rule["resources"] == ["nodes"]:
                    rule["verbs"] = [v for v in rule["verbs"] if v != "patch"]
    return manifests


@pytest.mark.parametrize("world", [{"rbac": _without_node_patch()}], indirect=True)
def test_release__role_without_node_patch__exit_3_names_it__node_unchanged(
    world: World, tmp_path: Path
) -> None:
    node = world.nodes[world.instance_ids[0]]
    world.cluster.patch(
        "Node",
        node,
        {
            "metadata": {"annotations": {PROGRESS_ANNOTATION: '{"phase": "drained"}'}},
            "spec": {"unschedulable": True},
        },
    )
    wait_until(lambda: node_tainted(world.cluster, node))  # the node controller's taint
    before = _state(world, node)

    released = _run(_cli(world, "release", "--node", node))

    assert released.returncode == 3, released.stdout + released.stderr
    assert "RBAC denied 'patch' on 'nodes'" in released.stderr
    assert "Traceback" not in released.stderr
    assert _state(world, node) == before
