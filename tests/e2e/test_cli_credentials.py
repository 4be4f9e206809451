"""The CLI's exec credential plugin failing mid-drain (issue 38, item 3), on both
backends, through a real plugin: a script that prints the drainer's token with an
expiry two seconds ahead, so that it runs again during the drain, and fails on the
runs its test chooses. A plugin that fails once is run again with back-off and the
drain goes on to drain every pod, the failure said once; one that keeps failing
ends the drain with exit 3, naming the plugin and how long it failed.

The drain waits on a budget that allows no disruption until the first token has
expired; then the test lets the pods go, and the evictions need a fresh token."""

from __future__ import annotations

import io
import logging
import re
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from drainer.cli.main import main
from drainer.k8s import auth
from testbed import World
from testbed.world import pods_on, wait_until

from .conftest import place_guarded

PLUGIN = """
import datetime, json, pathlib, sys
here = pathlib.Path(sys.argv[1])
runs = here / "runs"
n = len(runs.read_text().split()) + 1 if runs.exists() else 1
runs.write_text((runs.read_text() if runs.exists() else "") + f"{n} ")
spec = (here / "fail").read_text().strip()
if n >= int(spec[:-1]) if spec.endswith("-") else n == int(spec):
    print(f"plugin run {n}: cannot reach the identity provider", file=sys.stderr)
    sys.exit(1)
now = datetime.datetime.now(datetime.UTC)
expiry = now + datetime.timedelta(seconds=2)
(here / "expiry").write_text(str(expiry.timestamp()))
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1",
    "kind": "ExecCredential",
    "status": {"token": (here / "token").read_text(), "expirationTimestamp": expiry.isoformat()},
}))
"""
FAILED = "the plugin runs again in"
"""How the plugin's failure mid-drain is said (drainer/k8s/auth.py)."""


def _kubeconfig(world: World, here: Path, fail: str) -> Path:
    """A kubeconfig whose user is the plugin, failing on the runs `fail` names ("2":
    the second only; "2-": the second and every one after)."""
    (here / "plugin.py").write_text(PLUGIN)
    (here / "token").write_text(world.cluster.drainer_token)
    (here / "fail").write_text(fail)
    exec_spec = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": [str(here / "plugin.py"), str(here)],
        "interactiveMode": "Never",
    }
    cluster = {"server": world.cluster.url, "certificate-authority-data": world.cluster.ca_data}
    config = here / "kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"exec": exec_spec}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return config


def _runs(here: Path) -> list[str]:
    runs = here / "runs"
    return runs.read_text().split() if runs.exists() else []


def _lift_budget_once_the_token_expired(world: World, node: str, here: Path) -> threading.Thread:
    """Meanwhile: once the node is cordoned (the drain is under way, held by the
    budget) and the plugin's first token has expired, the budget lets the pods go."""

    def lift() -> None:
        wait_until(lambda: world.cluster.get("Node", node)["spec"].get("unschedulable"), 30)
        wait_until(lambda: time.time() > float((here / "expiry").read_text()) + 0.1, 10)
        world.cluster.patch("PodDisruptionBudget", "guard", {"spec": {"maxUnavailable": 2}})

    thread = threading.Thread(target=lift, daemon=True, name="lift-budget")
    thread.start()
    return thread


def _drain(config: Path, node: str, out: io.StringIO) -> int:
    return main(
        ["drain", node, "--ignore-daemonsets", "--timeout", "90s", "--kubeconfig", str(config)],
        stdout=out,
    )


def test_plugin_fails_once_mid_drain__every_pod_drained__exit_0__failure_said_once(
    world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node = place_guarded(world, 2)
    config = _kubeconfig(world, tmp_path, fail="2")
    lifting = _lift_budget_once_the_token_expired(world, node, tmp_path)
    out = io.StringIO()

    code = _drain(config, node, out)
    lifting.join(10)

    assert code == 0, out.getvalue()
    assert f"node {node} drained" in out.getvalue()
    assert not [p for p in pods_on(world.cluster, node) if "guarded" in p["metadata"]["name"]]
    assert _runs(tmp_path)[:3] == ["1", "2", "3"], "the second run failed, the third worked"
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    said = [m for m in warnings if "exec credential plugin" in m and FAILED in m]
    assert len(said) == 1, warnings
    assert "plugin.py" in said[0] and "process returned 1" in said[0]
    assert len([m for m in warnings if "works again" in m]) == 1, warnings
    assert not [m for m in warnings if "evicting" in m], "no eviction failed: retried in the call"


def test_plugin_keeps_failing_mid_drain__exit_3__names_the_plugin_and_how_long__node_cordoned(
    world: World,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(auth, "CREDENTIALS_OUTAGE_SECONDS", 2.0)  # 300 s in earnest
    node = place_guarded(world, 2)
    config = _kubeconfig(world, tmp_path, fail="2-")
    lifting = _lift_budget_once_the_token_expired(world, node, tmp_path)
    out = io.StringIO()

    started = time.monotonic()
    code = _drain(config, node, out)
    took = time.monotonic() - started
    lifting.join(10)

    err = capsys.readouterr().err
    assert code == 3, out.getvalue() + err
    # 2 s allowed; the run that finds it over comes with the next request's retry.
    assert "plugin.py" in err and re.search(r"it has failed on every run for [2-7] s", err), err
    assert "process returned 1" in err
    assert f"node {node} NOT drained" in out.getvalue()
    assert world.cluster.get("Node", node)["spec"].get("unschedulable") is True
    assert took < 30, f"{took:.0f} s: the drain went on long after the outage allowed"
    assert len(_runs(tmp_path)) <= 6, "runs paced, not one per request"


def test_plugin_failing_when_the_deadline_comes__timed_out_at_it__pods_left_name_the_plugin(
    world: World, tmp_path: Path
) -> None:
    """The outage allowed (5 minutes) is never waited for past the drain's deadline:
    the drain times out then, as any, its pods left naming the plugin's failure."""
    node = place_guarded(world, 2)
    config = _kubeconfig(world, tmp_path, fail="2-")
    lifting = _lift_budget_once_the_token_expired(world, node, tmp_path)
    out = io.StringIO()

    started = time.monotonic()
    code = main(
        ["drain", node, "--ignore-daemonsets", "--timeout", "6s", "--kubeconfig", str(config)],
        stdout=out,
    )
    took = time.monotonic() - started
    lifting.join(10)

    said = out.getvalue()
    assert code == 1, said
    assert f"node {node} NOT drained" in said
    assert "no valid token: the exec credential plugin" in said and "plugin.py" in said, said
    assert world.cluster.get("Node", node)["spec"].get("unschedulable") is True
    assert took < 40, f"{took:.0f} s for a drain of 6 s"
