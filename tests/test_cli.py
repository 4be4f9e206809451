"""`python -m drainer drain` against kubesim, as the drainer identity under RBAC."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from drainer.cli.arguments import DEFAULTS, options_from
from drainer.cli.display import Progress
from drainer.cli.main import main, python_m_prog
from drainer.engine.filters import FilterOptions
from drainer.engine.report import DrainEvent, Kind
from drainer.k8s.cordon import PROGRESS_ANNOTATION
from drainer.k8s.kube import Kube
from drainer.lifecycle.settings import Settings
from kubesim import KubeSim
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import pods_on, rbac_manifests, set_schedulable, wait_until

NODE = "ip-10-0-0-1.ec2.internal"


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(speed=20) as running:
        running.apply(rbac_manifests())
        running.apply(
            [
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}}
                for n in (NODE, "ip-10-0-0-2.ec2.internal")
            ]
        )
        yield running


def _run(sim: KubeSim, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(
        ["drain", "--kubeconfig", str(sim.kubeconfig), "--context", "drainer", *args], stdout=out
    )
    return code, out.getvalue()


def test_drain_node__as_drainer_context__exit_0_and_progress(sim: KubeSim) -> None:
    sim.apply([w.pod("lonely", node_name=NODE, emptydir=True), w.daemonset("agent")])
    wait_until(lambda: len(pods_on(Cluster.of_kubesim(sim), NODE)) == 2)

    code, output = _run(
        sim, "--node", NODE, "--ignore-daemonsets", "--delete-emptydir-data", "--force"
    )

    assert code == 0, output
    assert "cordoned" in output
    assert "evicted  default/lonely" in output
    assert "skip  kube-system/agent-" in output
    assert (
        "warning: emptyDir data is deleted with the pod; "
        "no controller will recreate this pod: default/lonely" in output
    )
    assert f"node {NODE} drained" in output
    assert sim.get("Node", NODE)["spec"]["unschedulable"] is True


def test_dry_run__changes_nothing__lists_what_would_go(sim: KubeSim) -> None:
    sim.apply(w.pod("lonely", node_name=NODE))
    wait_until(
        lambda: pods_on(Cluster.of_kubesim(sim), NODE)[0]["status"].get("phase") == "Running"
    )

    code, output = _run(sim, "--node", NODE, "--dry-run", "--force")

    assert code == 0, output
    assert "would evict  default/lonely" in output
    assert not sim.get("Node", NODE)["spec"].get("unschedulable")
    assert not pods_on(Cluster.of_kubesim(sim), NODE)[0]["metadata"].get("deletionTimestamp")


def test_pdb_never_allows__timeout__exit_1_names_budget_and_pod(sim: KubeSim) -> None:
    sim.apply(
        [
            w.pod("guarded", node_name=NODE, labels={"app": "guarded"}),
            w.budget("guard", {"app": "guarded"}, max_unavailable=0),
        ]
    )
    wait_until(
        lambda: pods_on(Cluster.of_kubesim(sim), NODE)[0]["status"].get("phase") == "Running"
    )

    code, output = _run(sim, "--node", NODE, "--timeout", "1", "--force")

    assert code == 1
    assert "NOT drained" in output
    assert output.count("refused  default/guarded by PodDisruptionBudget default/guard;") == 1
    assert "left  default/guarded (PodDisruptionBudget default/guard" in output


def test_rbac_missing__exit_3_names_verb_and_resource(
    sim: KubeSim, capsys: pytest.CaptureFixture[str]
) -> None:
    from kubesim.api import R

    sim.api.delete(R["clusterrolebindings.rbac.authorization.k8s.io"], "", "eks-node-drainer")

    code, _ = _run(sim, "--node", NODE)

    assert code == 3
    error = capsys.readouterr().err
    assert "RBAC denied 'get' on 'nodes'" in error
    assert "kubectl apply -f k8s-rbac/" in error


def test_bad_kubeconfig__exit_2_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "config"
    broken.write_text("apiVersion: v1\nkind: Config\ncontexts: []\n")

    code = main(["drain", "--kubeconfig", str(broken), "--node", NODE])

    assert code == 2
    assert "cannot load kubeconfig" in capsys.readouterr().err


def test_module_entry_point__help_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "drainer", "drain", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0
    assert "--instance-id" in result.stdout


# --- without a server: the flags' settings and the progress lines ------------------------


def _args(*flags: str) -> argparse.Namespace:
    from drainer.cli.arguments import parser as _parser

    return _parser("python -m drainer").parse_args(["drain", "--node", NODE, *flags])


def test_no_flags__the_lambdas_settings__but_kubectls_evictions() -> None:
    assert Settings().drain_options() == DEFAULTS
    assert options_from(_args()) == dataclasses.replace(
        Settings().drain_options(),
        filters=FilterOptions(evict_unreplicated=False, evict_emptydir=False),
    )


def test_flags__change_their_settings_only() -> None:
    options = options_from(
        _args(
            "--concurrency",
            "4",
            "--grace-period",
            "10",
            "--stuck-pod-seconds",
            "5",
            "--evict-daemonset-pods",
            "--force",
            "--delete-emptydir-data",
            "--dry-run",
            "--ignore-do-not-disrupt",
        )
    )

    assert options == dataclasses.replace(
        Settings().drain_options(),
        concurrency=4,
        grace_period_seconds=10,
        stuck_pod_seconds=5,
        filters=FilterOptions(evict_unreplicated=True, evict_emptydir=True, evict_daemonset=True),
        dry_run=True,
        dry_run_server=False,  # a bare --dry-run is kubectl's client dry run: reads only
        honor_do_not_disrupt=False,
    )


def _progress(events: list[DrainEvent], verbose: bool = False) -> list[str]:
    stream = io.StringIO()
    progress = Progress(stream, NODE, verbose)
    for event in events:
        progress(event)
    # "[  0.0s]       label  subject detail": the time varies, the rest is the line.
    return [line.split("] ", 1)[1].strip() for line in stream.getvalue().splitlines()]


def test_progress__one_line_per_event__a_refusal_once_per_pod() -> None:
    lines = _progress(
        [
            DrainEvent(Kind.CORDONED),
            DrainEvent(Kind.SKIPPED, pod="kube-system/agent", reason="DaemonSet pod"),
            DrainEvent(Kind.EVICTING, pod="shop/web"),
            DrainEvent(Kind.REFUSED, pod="shop/web", budget="shop/web"),
            DrainEvent(Kind.REFUSED, pod="shop/web", budget="shop/web"),
            DrainEvent(Kind.EVICTED, pod="shop/web", refusals=2),
            DrainEvent(Kind.GONE, pod="shop/web", seconds=3.25),
            DrainEvent(Kind.SEVERAL_BUDGETS, pod="shop/db", budget="shop/a, shop/b"),
            DrainEvent(Kind.WITH_NAMESPACE, pod="old/job"),
            DrainEvent(Kind.LEFT, pod="shop/db", reason="more than one budget"),
        ]
    )

    assert lines == [
        f"cordoned  {NODE}",
        "skip  kube-system/agent (DaemonSet pod)",
        "refused  shop/web by PodDisruptionBudget shop/web; retrying when it allows",
        "evicted  shop/web after 2 budget refusals",
        "gone  shop/web after 3.2 s",
        "refused  shop/db by more than one PodDisruptionBudget (shop/a, shop/b): fix them",
        "goes with ns  old/job (its namespace is being deleted; not evicted, waited for)",
        "left  shop/db (more than one budget)",
    ]


def test_progress__eviction_attempts__only_when_verbose() -> None:
    attempt = DrainEvent(Kind.EVICTING, pod="shop/web")

    assert _progress([attempt]) == []
    assert _progress([attempt], verbose=True) == ["evict  shop/web"]


@pytest.mark.parametrize("kind", list(Kind))
def test_progress__every_kind__prints_a_line(kind: Kind) -> None:
    assert len(_progress([DrainEvent(kind, pod="shop/web")], verbose=True)) == 1


# -- like kubectl drain: a missing node, bad arguments ---------------------------------


def test_missing_node__exit_1_node_not_found__nothing_touched(
    sim: KubeSim, capsys: pytest.CaptureFixture[str]
) -> None:
    code, output = _run(sim, "--node", "nosuchnode")

    assert code == 1
    assert "error: node nosuchnode not found" in capsys.readouterr().err
    assert "drained" not in output
    writes = [r for r in sim.requests() if r.method not in ("GET", "HEAD")]
    assert writes == [], [(r.method, r.path) for r in writes]


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        pytest.param(["--node", "../namespaces/default"], "is not a node name", id="path-node"),
        pytest.param(["--node", ""], "is not a node name", id="empty-node"),
        pytest.param(["--node", "Node_1"], "is not a node name", id="uppercase-node"),
        pytest.param(["--node", NODE, "--timeout", "nan"], "positive, finite", id="nan"),
        pytest.param(["--node", NODE, "--timeout", "inf"], "positive, finite", id="inf"),
        pytest.param(["--node", NODE, "--timeout", "-5"], "positive, finite", id="negative"),
        pytest.param(
            ["--node", NODE, "--concurrency", "0"],
            "argument --concurrency: '0' is not an integer from 1 to 256",
            id="concurrency",
        ),
        # Every number has an upper bound too, the Lambda setting's, checked before any
        # request (a timeout of 1e12 cordoned, then crashed on a year past 9999).
        pytest.param(
            ["--node", NODE, "--timeout", "1e12"],
            "argument --timeout: '1e12' is more than 172800 seconds (48 hours",
            id="timeout-1e12",
        ),
        pytest.param(
            ["--node", NODE, "--timeout", "172800.5"],
            "argument --timeout: '172800.5' is more than 172800 seconds",
            id="timeout-past-48h",
        ),
        pytest.param(
            ["--node", NODE, "--concurrency", str(10**30)],
            f"argument --concurrency: '{10**30}' is not an integer from 1 to 256",
            id="concurrency-huge",
        ),
        pytest.param(
            ["--node", NODE, "--grace-period", "86401"],
            "argument --grace-period: '86401' is not an integer up to 86400 (negative: the "
            "pod's own)",
            id="grace-period-huge",
        ),
        pytest.param(
            ["--node", NODE, "--grace-period", "-1.5"],
            "argument --grace-period: '-1.5' is not an integer up to 86400 (negative: the "
            "pod's own)",
            id="grace-period-not-whole",
        ),
        pytest.param(
            ["--node", NODE, "--stuck-pod-seconds", "86401"],
            "argument --stuck-pod-seconds: '86401' is not an integer from 0 to 86400",
            id="stuck-huge",
        ),
        pytest.param(["--instance-id", "i-xyz"], "not an EC2 instance id", id="instance-id"),
        pytest.param(["--node", NODE, "--pod-selector", " "], "not a label selector", id="sel"),
    ],
)
def test_bad_arguments__usage_error_exit_2__before_any_request(
    sim: KubeSim, capsys: pytest.CaptureFixture[str], args: list[str], complaint: str
) -> None:
    before = len(sim.requests())

    with pytest.raises(SystemExit) as exited:
        _run(sim, *args)

    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "usage:" in error
    assert complaint in error
    assert len(sim.requests()) == before, "no request was sent"


def test_numbers_at_their_bounds__accepted() -> None:
    args = _args(
        "--timeout", "172800", "--concurrency", "256", "--grace-period", "86400",
        "--stuck-pod-seconds", "86400",
    )  # fmt: skip

    assert (args.timeout, args.concurrency, args.grace_period, args.stuck_pod_seconds) == (
        172800.0, 256, 86400, 86400,
    )  # fmt: skip
    low = _args("--timeout", "0.5", "--concurrency", "1", "--grace-period", "-1")
    assert (low.timeout, low.concurrency, low.grace_period) == (0.5, 1, -1)


def test_instance_id_without_a_region__clear_error_exit_3_as_plan(
    sim: KubeSim,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    for variable in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))

    code, _ = _run(sim, "--instance-id", "i-0123456789abcdef0")

    assert code == 3  # an access problem, as plan --asg's (docs/cli.md), not a usage error
    assert "no AWS region" in capsys.readouterr().err


def test_instance_id_with_only_aws_region__region_taken_from_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from drainer.cli.main import _aws_session

    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_REGION", "eu-west-3")

    assert _aws_session().region_name == "eu-west-3"


@pytest.mark.parametrize(
    ("flags", "refused"),
    [
        pytest.param(
            [],
            [
                "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): "
                "kube-system/agent-",
                "cannot delete Pods with local storage (use --delete-emptydir-data to "
                "override): default/lonely",
                "cannot delete Pods that declare no controller (use --force to override): "
                "default/lonely",
            ],
            id="no-flags",
        ),
        pytest.param(
            ["--ignore-daemonsets", "--force"],
            ["cannot delete Pods with local storage", "default/lonely"],
            id="emptydir-only",
        ),
    ],
)
def test_kubectl_refusals__without_overrides__exit_1_nothing_changed(
    sim: KubeSim, capsys: pytest.CaptureFixture[str], flags: list[str], refused: list[str]
) -> None:
    sim.apply([w.pod("lonely", node_name=NODE, emptydir=True), w.daemonset("agent")])
    wait_until(lambda: len(pods_on(Cluster.of_kubesim(sim), NODE)) == 2)
    before = len(sim.requests())

    code, output = _run(sim, "--node", NODE, *flags)

    assert code == 1
    assert "nothing changed" in output
    error = capsys.readouterr().err
    for text in refused:
        assert text in error
    writes = [r for r in sim.requests()[before:] if r.method not in ("GET", "HEAD")]
    assert writes == [], [(r.method, r.path) for r in writes]
    assert not sim.get("Node", NODE)["spec"].get("unschedulable")


def test_pod_selector__only_selected_pods_evicted__drained(sim: KubeSim) -> None:
    sim.apply(
        [
            w.pod("picked", node_name=NODE, labels={"app": "picked"}),
            w.pod("kept", node_name=NODE, labels={"app": "kept"}),
        ]
    )
    wait_until(lambda: len(pods_on(Cluster.of_kubesim(sim), NODE)) == 2)

    code, output = _run(sim, "--node", NODE, "--force", "--pod-selector", "app in (picked)")

    assert code == 0, output
    assert "evicted  default/picked" in output
    assert "default/kept" not in output
    wait_until(lambda: len(pods_on(Cluster.of_kubesim(sim), NODE)) == 1)
    remaining = pods_on(Cluster.of_kubesim(sim), NODE)
    assert remaining[0]["metadata"]["name"] == "kept"
    assert not remaining[0]["metadata"].get("deletionTimestamp")


def test_output_json__summary_alone_on_stdout__progress_on_stderr(
    sim: KubeSim, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    sim.apply(w.pod("lonely", node_name=NODE))
    wait_until(lambda: len(pods_on(Cluster.of_kubesim(sim), NODE)) == 1)

    code, output = _run(sim, "--node", NODE, "--force", "-o", "json")

    assert code == 0
    summary = json.loads(output)
    assert summary["result"] == "drained"
    assert summary["evicted"] == 1
    assert summary["exit_code"] == 0
    assert "evicted  default/lonely" in capsys.readouterr().err


@pytest.mark.parametrize("dry_run", [False, True], ids=["drain", "dry-run"])
def test_real_process__each_event_once__no_log_line_repeats_it(sim: KubeSim, dry_run: bool) -> None:
    """As a person runs it: the progress lines and the closing warning on stdout,
    and not the drain's own event log lines (nor the dry run's) again on stderr."""
    sim.apply(w.pod("lonely", node_name=NODE))
    wait_until(lambda: len(pods_on(Cluster.of_kubesim(sim), NODE)) == 1)

    run = subprocess.run(
        [sys.executable, "-m", "drainer", "drain", "--node", NODE, "--force",
         "--kubeconfig", str(sim.kubeconfig), "--context", "drainer",
         *(["--dry-run"] if dry_run else [])],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip

    assert run.returncode == 0, run.stderr
    both = run.stdout + run.stderr
    assert both.count("no controller will recreate this pod: default/lonely") == 1, both
    verb = "would evict" if dry_run else "evicted"
    assert both.count(f"{verb}  default/lonely") == 1, both
    assert "drainer.engine" not in run.stderr


# -- the end of a drain: signals, a closed stdout, the last line ------------------------


def _guarded(sim: KubeSim) -> None:
    """A pod on NODE that a budget never lets go: the drain waits until stopped."""
    sim.apply(
        [
            w.pod("guarded", node_name=NODE, labels={"app": "guarded"}),
            w.budget("guard", {"app": "guarded"}, max_unavailable=0),
        ]
    )
    wait_until(
        lambda: pods_on(Cluster.of_kubesim(sim), NODE)[0]["status"].get("phase") == "Running"
    )


def _record(sim: KubeSim) -> dict[str, Any]:
    annotations = sim.get("Node", NODE)["metadata"].get("annotations") or {}
    return dict(json.loads(annotations[PROGRESS_ANNOTATION]))


def _drain_process(sim: KubeSim) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "drainer", "drain", "--node", NODE, "--force",
         "--kubeconfig", str(sim.kubeconfig), "--context", "drainer"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def _read_until(process: subprocess.Popen[bytes], text: str, timeout: float = 60) -> bytes:
    """stdout up to `text` (and what came with it)."""
    assert process.stdout is not None
    seen = b""
    deadline = time.monotonic() + timeout
    while text.encode() not in seen:
        ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(process.stdout.fileno(), 65536) if ready else b""
        if not chunk:
            process.kill()
            raise AssertionError(f"{text!r} not printed:\n{seen.decode()}")
        seen += chunk
    return seen


@pytest.mark.parametrize(
    ("signum", "name", "status"),
    [
        pytest.param(signal.SIGINT, "Ctrl-C", 130, id="SIGINT"),
        pytest.param(signal.SIGTERM, "SIGTERM", 143, id="SIGTERM"),
        pytest.param(signal.SIGHUP, "SIGHUP", 129, id="SIGHUP"),
    ],
)
def test_signal_during_budget_wait__node_state_and_undo_said__record_interrupted__128_plus_signal(
    sim: KubeSim, signum: int, name: str, status: int
) -> None:
    """As Ctrl-C, so a CI job's timeout (SIGTERM) and a closed terminal (SIGHUP): they
    used to kill the drain without a word, leaving a `draining` record."""
    _guarded(sim)
    process = _drain_process(sim)
    seen = _read_until(process, "refused  default/guarded")

    process.send_signal(signum)
    rest, errors = process.communicate(timeout=30)

    output = (seen + rest).decode()
    assert process.returncode == status, output + errors.decode()
    assert f"interrupted by {name}: no new evictions" in errors.decode()
    assert "Traceback" not in errors.decode()
    lines = output.splitlines()
    assert lines[-2].startswith(f"interrupted by {name}: node {NODE} is cordoned"), output
    assert "1 pods left: default/guarded" in lines[-2]
    assert lines[-1].startswith(f"to undo: {python_m_prog()} release --node {NODE}"), output
    assert _record(sim)["phase"] == "interrupted"
    assert sim.get("Node", NODE)["spec"]["unschedulable"] is True


def test_sighup_with_stdout_gone__verdict_and_undo_on_stderr__exit_129(sim: KubeSim) -> None:
    """A closed terminal: stdout's reader is gone (EPIPE, as a hung-up tty's EIO). The
    node's state and the undo command go to stderr; no traceback, and not Python's
    exit status 120 for a stdout it could not flush."""
    _guarded(sim)
    process = _drain_process(sim)
    _read_until(process, "refused  default/guarded")
    assert process.stdout is not None
    process.stdout.close()

    process.send_signal(signal.SIGHUP)
    _, errors = process.communicate(timeout=30)

    text = errors.decode()
    assert process.returncode == 129, text
    assert "Traceback" not in text and "Exception ignored" not in text, text
    assert f"interrupted by SIGHUP: node {NODE} is cordoned" in text
    assert text.splitlines()[-1].startswith(f"to undo: {python_m_prog()} release --node {NODE}")
    assert _record(sim)["phase"] == "interrupted"


def test_sigterm_before_the_drain__nothing_changed__exit_143(
    sim: KubeSim, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unhandled(signum: int, frame: object) -> None:  # today's default would kill pytest
        raise AssertionError("SIGTERM reached the default handler")

    def get_node_then_sigterm(self: Kube, name: str) -> dict[str, Any] | None:
        os.kill(os.getpid(), signal.SIGTERM)
        return real_get_node(self, name)

    real_get_node = Kube.get_node
    monkeypatch.setattr(Kube, "get_node", get_node_then_sigterm)
    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        code, output = _run(sim, "--node", NODE, "--force")
        restored = signal.getsignal(signal.SIGTERM) is unhandled
    finally:
        signal.signal(signal.SIGTERM, previous)

    assert code == 143, output
    assert "interrupted before anything changed" in capsys.readouterr().err
    assert restored, "the CLI puts back the SIGTERM handler it found"
    assert not sim.get("Node", NODE)["spec"].get("unschedulable")


class _Verdict(io.StringIO):
    """stdout that says when the undo line, the verdict's last, is written."""

    def __init__(self) -> None:
        super().__init__()
        self.given = threading.Event()

    def write(self, text: str, /) -> int:
        written = super().write(text)
        if "to undo: " in self.getvalue():
            self.given.set()
        return written


def test_eviction_answered_after_the_drain_ended__nothing_printed_after_the_verdict(
    sim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drain ends (Ctrl-C) while an eviction is in flight; its answer comes after
    the verdict, and used to be printed after it ('evicted  default/slow')."""
    sim.apply(w.pod("slow", node_name=NODE))
    wait_until(
        lambda: pods_on(Cluster.of_kubesim(sim), NODE)[0]["status"].get("phase") == "Running"
    )
    out = _Verdict()
    real_evict = Kube.evict

    def evict_answered_late(self: Kube, pod: dict[str, Any], **kwargs: Any) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # the CLI's handler: the drain ends meanwhile
        out.given.wait(timeout=5)  # an engine that waits for this answer prints no verdict yet
        real_evict(self, pod, **kwargs)

    monkeypatch.setattr(Kube, "evict", evict_answered_late)
    code = main(
        ["drain", "--kubeconfig", str(sim.kubeconfig), "--context", "drainer",
         "--node", NODE, "--force"],
        stdout=out,
    )  # fmt: skip
    for thread in threading.enumerate():  # the eviction's answer, and what it prints
        if thread.name.startswith("evict"):
            thread.join(timeout=10)

    lines = out.getvalue().splitlines()
    assert code == 130, lines
    assert lines[-1].startswith("to undo: "), lines
    assert lines[-2].startswith(f"interrupted by Ctrl-C: node {NODE} is cordoned"), lines


def test_log_lines__after_the_verdict__dropped_as_the_progress_lines_are() -> None:
    """An eviction answered late logs too ('evicting ... failed; retrying'): the
    terminal's log handler is quiet once the drain is over, as the display is."""
    from drainer.cli.display import SafeStream
    from drainer.cli.terminal import Terminal as _Terminal
    from drainer.cli.terminal import TerminalLog as _TerminalLog

    stream = io.StringIO()
    terminal = _Terminal(out=SafeStream(stream), err=SafeStream(stream), log=_TerminalLog())
    late = logging.makeLogRecord(
        {"name": "drainer.engine.drain", "msg": "evicting shop/web failed"}
    )
    event = logging.makeLogRecord(
        {"name": "drainer.engine.drain", "msg": "evicted", "event": "evicted"}
    )
    assert terminal.log.filter(late) and not terminal.log.filter(event)

    terminal.drain_over(Progress(stream, NODE))

    assert not terminal.log.filter(late)


# --- the operator's rough edges (issue 27) ------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "meant"),
    [
        (["--f"], "--force"),
        (["--del"], "--delete-emptydir-data"),
        (["--ev"], "--evict-daemonset-pods"),
        (["--ignore-daemonset"], "--ignore-daemonsets"),
    ],
    ids=["force", "emptydir", "daemonsets", "typo"],
)
def test_abbreviations_and_typos__refused_with_the_drains_usage_and_a_suggestion(
    sim: KubeSim, capsys: pytest.CaptureFixture[str], flags: list[str], meant: str
) -> None:
    """argparse would take `--f` for `--force`: a dangerous flag switched on unseen."""
    before = len(sim.requests())

    with pytest.raises(SystemExit) as exited:
        _run(sim, "--node", NODE, *flags)

    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert f"usage: {python_m_prog()} drain" in error, error
    assert f"unrecognized arguments: {flags[0]}" in error
    assert f"did you mean {meant}" in error
    assert len(sim.requests()) == before, "nothing was sent"


@pytest.mark.parametrize("command", ["drain", "release"])
def test_aws_profile_that_does_not_exist__one_line__exit_3(
    command: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "prod")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))

    code = main([command, "--instance-id", "i-0aaaaaaaaaaaaaaa1"], stdout=io.StringIO())

    assert code == 3
    error = capsys.readouterr().err
    assert error.splitlines() == [
        "error: AWS profile 'prod' (AWS_PROFILE) is not in ~/.aws/config or ~/.aws/credentials: "
        "create it (aws configure --profile prod), or unset AWS_PROFILE"
    ]


def _no_aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for variable in (
        "AWS_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
    ):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for source in (
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(source, raising=False)


def test_no_aws_credentials__said_so__not_a_network_problem__exit_3_as_plan(
    sim: KubeSim,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _no_aws_credentials(monkeypatch, tmp_path)

    code, _ = _run(sim, "--instance-id", "i-0aaaaaaaaaaaaaaa1")

    assert code == 3  # plan --asg exits 3 for the same problem (docs/cli.md)
    error = capsys.readouterr().err
    assert "no AWS credentials found" in error, error
    assert "network" not in error


def test_no_aws_credentials__json__one_error_document_exit_3(
    sim: KubeSim,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _no_aws_credentials(monkeypatch, tmp_path)

    code, out = _run(sim, "--instance-id", "i-0aaaaaaaaaaaaaaa1", "-o", "json")

    document = json.loads(out)
    assert (code, document["result"], document["exit_code"]) == (3, "error", 3), document
    assert "no AWS credentials found" in document["message"]
    assert not sim.get("Node", NODE)["spec"].get("unschedulable")  # nothing touched


def test_aws_endpoint_unreachable__exit_3__says_so(
    sim: KubeSim,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket
    import types

    import botocore.endpoint

    with socket.socket() as closed:  # a port of this machine that nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    pauses: list[float] = []  # botocore's backoff between its retries, not slept
    monkeypatch.setattr(
        botocore.endpoint, "time", types.SimpleNamespace(sleep=pauses.append, time=time.time)
    )

    code, _ = _run(sim, "--instance-id", "i-0aaaaaaaaaaaaaaa1")

    assert code == 3
    [line] = capsys.readouterr().err.splitlines()
    assert "EndpointConnectionError" in line and "check the network path" in line, line


def test_dry_run__a_pod_its_budget_holds__reported_held_naming_the_budget(sim: KubeSim) -> None:
    cluster = Cluster.of_kubesim(sim)
    set_schedulable(cluster, ["ip-10-0-0-2.ec2.internal"], False)
    sim.apply([w.deployment("db", 1), w.budget("db", {"app": "db"}, max_unavailable=0)])
    sim.apply(w.pod("lonely", node_name=NODE))
    wait_until(lambda: len(pods_on(cluster, NODE)) == 2, timeout=20)

    code, output = _run(sim, "--node", NODE, "--dry-run", "--force")

    assert code == 0, output
    assert "would evict  default/lonely" in output
    assert "would evict  default/db-" not in output
    assert "PodDisruptionBudget default/db allows no disruption now" in output
    assert "dry run: would evict 1 pods; 1 held by budgets allowing no disruption now: " in output
    assert "default/db (1)" in output


def _json_run(sim: KubeSim, command: str, *args: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    code = main(
        [command, "--kubeconfig", str(sim.kubeconfig), "--context", "drainer", "-o", "json", *args],
        stdout=out,
    )
    return code, json.loads(out.getvalue())  # one JSON document, nothing else


def test_output_json__whatever_happens__one_json_document_on_stdout(sim: KubeSim) -> None:
    sim.apply(w.pod("lonely", node_name=NODE))
    wait_until(lambda: len(pods_on(Cluster.of_kubesim(sim), NODE)) == 1)

    missing = _json_run(sim, "drain", "--node", "ip-10-9-9-9.ec2.internal")
    refused = _json_run(sim, "drain", "--node", NODE)  # an unreplicated pod, no --force
    released = _json_run(sim, "release", "--node", NODE)

    assert missing == (
        1,
        {
            "result": "no_node",
            "outcome": "no_node",  # result's alias, for one release
            "message": "node ip-10-9-9-9.ec2.internal not found",
            "exit_code": 1,
        },
    )
    code, document = refused
    assert (code, document["result"], document["exit_code"]) == (1, "refused", 1)
    assert list(document["refusals"].values()) == [["default/lonely"]]
    code, document = released
    assert (code, document["result"], document["node"]) == (0, "unchanged", NODE)


def _without_eviction_rule(sim: KubeSim) -> None:
    """k8s-rbac/ with the pods/eviction rule taken out of the ClusterRole."""
    from kubesim.api import R

    (role,) = [m for m in rbac_manifests() if m["kind"] == "ClusterRole"]
    role["rules"] = [r for r in role["rules"] if "pods/eviction" not in r.get("resources", [])]
    sim.api.delete(R["clusterroles.rbac.authorization.k8s.io"], "", role["metadata"]["name"])
    sim.apply(role)


def test_no_eviction_permission__said_before_the_cordon__nothing_changed(
    sim: KubeSim, capsys: pytest.CaptureFixture[str]
) -> None:
    sim.apply(w.pod("lonely", node_name=NODE))
    wait_until(lambda: len(pods_on(Cluster.of_kubesim(sim), NODE)) == 1)
    _without_eviction_rule(sim)

    code, _ = _run(sim, "--node", NODE, "--force")

    assert code == 3
    error = capsys.readouterr().err
    assert error.count("may not evict pods (RBAC: create pods/eviction)") == 1, error
    node = sim.get("Node", NODE)
    assert not node["spec"].get("unschedulable"), "cordoned by a drain that cannot evict"
    assert not (node["metadata"].get("labels") or {}).get(
        "node.kubernetes.io/exclude-from-external-load-balancers"
    )


def test_pod_selector_matching_nothing__a_warning__no_error(
    sim: KubeSim, capsys: pytest.CaptureFixture[str]
) -> None:
    sim.apply(w.pod("lonely", node_name=NODE, labels={"app": "web"}))
    wait_until(lambda: len(pods_on(Cluster.of_kubesim(sim), NODE)) == 1)

    code, output = _run(sim, "--node", NODE, "--pod-selector", "ap=web")

    assert code == 0, output
    assert f"warning: --pod-selector ap=web matches no pod on {NODE}" in capsys.readouterr().err


def test_malformed_pod_selector__a_usage_error_exit_2(
    sim: KubeSim, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = _run(sim, "--node", NODE, "--pod-selector", "app in (web")

    assert code == 2
    assert "--pod-selector 'app in (web'" in capsys.readouterr().err


def test_kubeconfig_file_missing__says_no_such_file__exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope" / "config"

    code = main(["drain", "--node", NODE, "--kubeconfig", str(missing)], stdout=io.StringIO())

    assert code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: no kubeconfig file at {missing}: write one with `aws eks ")


def test_explicit_kubeconfig_list_with_a_missing_file__refused_exit_2__a_kubeconfig_list_skips_it(
    sim: KubeSim,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # kubectl: --kubeconfig names one file, which must exist; only KUBECONFIG's list
    # skips the files it names that do not exist.
    listed = f"{sim.kubeconfig}{os.pathsep}{tmp_path / 'missing'}"
    release = ["release", "--node", NODE, "--context", "drainer", "--dry-run"]

    code = main([*release, "--kubeconfig", listed], stdout=io.StringIO())

    assert code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: no kubeconfig file at {listed}: ")
    monkeypatch.setenv("KUBECONFIG", listed)
    assert main(release, stdout=io.StringIO()) == 0


def test_api_server_unreachable__one_short_line_per_retry(
    sim: KubeSim,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(sim.kubeconfig.read_text())
    sim.stop()  # the address is now refused
    loader = Kube.from_kubeconfig.__func__  # type: ignore[attr-defined]
    pauses: list[float] = []

    def without_real_pauses(cls: type[Kube], *args: Any, **kwargs: Any) -> Kube:
        kube = loader(cls, *args, **kwargs)
        kube._sleep = pauses.append
        return kube

    monkeypatch.setattr(Kube, "from_kubeconfig", classmethod(without_real_pauses))

    code = main(
        ["drain", "--kubeconfig", str(kubeconfig), "--context", "drainer", "--node", NODE],
        stdout=io.StringIO(),
    )

    assert code == 3
    retries = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    (error,) = capsys.readouterr().err.splitlines()
    assert len(retries) == len(pauses) > 0  # a line per retry, then the error
    for line in [*retries, error]:
        assert "cannot reach the API server: Connection refused (127.0.0.1:" in line, line
        assert len(line) < 160, line


# --- how it is invoked: the wheel's two commands, python -m ------------------------------


@pytest.mark.parametrize("prog", ["eks-node-drainer", "kubectl drainer", "python -m drainer"])
def test_version__said_as_invoked(prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    import drainer

    with pytest.raises(SystemExit) as exited:
        main(["--version"], prog=prog)

    assert exited.value.code == 0
    assert capsys.readouterr().out == f"{prog} {drainer.__version__}\n"


def test_node_as_kubectl_takes_it__positional__same_as_the_flag(sim: KubeSim) -> None:
    sim.apply([w.pod("lonely", node_name=NODE)])
    out = io.StringIO()

    code = main(
        ["release", NODE, "--kubeconfig", str(sim.kubeconfig), "--context", "drainer"],
        stdout=out,
    )

    assert code == 0, out.getvalue()
    assert f"node {NODE}" in out.getvalue()


def test_node_given_twice__usage_error_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["drain", NODE, "--node", "other"], prog="eks-node-drainer")

    assert exited.value.code == 2
    assert "usage: eks-node-drainer drain" in capsys.readouterr().err


def test_undo_command__said_the_way_the_drain_was_started() -> None:
    from drainer.cli.arguments import parse as _parse
    from drainer.cli.main import _undo_command

    for prog, expected in [
        ("eks-node-drainer", "eks-node-drainer release --node n1 --context prod"),
        ("kubectl drainer", "kubectl drainer release --node n1 --context prod"),
    ]:
        args = _parse(["drain", "n1", "--context", "prod"], prog)
        assert _undo_command(args, "n1") == expected


def test_python_m__the_interpreters_path_when_python_on_path_is_another(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A venv not activated: `python -m drainer release` would run another Python,
    without drainer; the undo names this one."""
    from drainer.cli.main import python_m_prog

    monkeypatch.setenv("PATH", str(tmp_path))
    assert python_m_prog() == f"{sys.executable} -m drainer"
    (tmp_path / "python").symlink_to(sys.executable)
    assert python_m_prog() == "python -m drainer"
