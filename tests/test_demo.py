"""The demo: its outcome (from the summary JSON, not its wording), Ctrl-C, and the
pieces it checks the drainer with (budget margins, the request log, the template)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from demo import sample, template
from demo.observe import Observer, budget_margins, selects
from demo.summary import classify
from demo.view import View
from drainer.lifecycle.settings import VARIABLES
from testbed import workloads as objects
from testbed.workloads import Obj

ROOT = Path(__file__).resolve().parent.parent


def _run_demo(tmp_path: Path, *args: str, timeout: float = 110) -> tuple[dict[str, Any], str]:
    summary_path = tmp_path / "summary.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "demo",
            "--plain",
            "--summary-json",
            str(summary_path),
            "--logs",
            str(tmp_path / "logs"),
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return json.loads(summary_path.read_text()), completed.stdout


def test_default_scenario__node_drained__continue_budgets_kept_volume_detached(
    tmp_path: Path,
) -> None:
    summary, output = _run_demo(tmp_path, "--speed", "10")

    assert summary["checks_passed"] is True
    # The README's sample (python -m demo.sample) is what a run prints, timings aside.
    readme = (ROOT / "README.md").read_text()
    assert sample.stale(sample.readme_sample(readme), output) == [], (
        "README.md's demo sample is stale: run .venv/bin/python -m demo.sample"
    )
    assert summary["lifecycle"]["result"] == "CONTINUE"
    assert summary["lifecycle"]["closed_by"] == "complete"
    assert summary["lifecycle"]["instance_state"] == "terminated"
    assert summary["drainer_result"] == "drained"
    pods = summary["pods"]
    assert summary["all_non_daemonset_pods_evicted"] is True
    assert not pods["forced"]
    assert not pods["left_when_released"]
    evicted = pods["evicted"]
    assert "shop/db-0" in evicted
    assert "default/adhoc-report" in evicted
    assert len([p for p in evicted if p.startswith("shop/web-")]) == 2
    assert len([p for p in evicted if p.startswith("kube-system/coredns-")]) == 1
    assert list(pods["skipped"]) == [p for p in pods["on_node"] if "aws-node" in p]
    # Every evicted pod with a controller came back Ready on another node.
    assert set(pods["replacements"]) == set(evicted) - {"default/adhoc-report"}
    assert summary["budget_never_violated"] is True
    assert set(summary["budgets"]) == {"shop/web", "kube-system/coredns"}
    assert summary["budgets"]["shop/web"]["worst_margin"] == 0, "one web pod at a time"
    # The second web pod waits for the budget's watch, not a loop of refusals.
    assert summary["pdb_refusals"] <= 1
    assert summary["volumes"]["on_node"]
    assert summary["volumes"]["detached"] == summary["volumes"]["on_node"]
    assert summary["volumes"]["attached_when_released"] == []
    assert summary["settings_source"] == "template.yaml defaults"
    assert "\033[" not in output, "plain mode has no escape codes"
    logs = (tmp_path / "logs" / "function.log").read_text()
    assert "drain finished" in logs
    # The instance left the controller's target group before CONTINUE, in one line.
    assert "target group k8s-default-web (AWS Load Balancer Controller" in output
    assert output.count("left 1 of 1 target group(s) after") == 1


def test_spot__drained_within_the_warning_window__hook_waits_for_that_drain(
    tmp_path: Path,
) -> None:
    summary, output = _run_demo(tmp_path, "--spot", "--speed", "2")

    assert summary["checks_passed"] is True
    spot = summary["spot"]
    assert spot["result"] == "drained"
    assert spot["drain_seconds"] < spot["window_seconds"] == 105
    assert spot["hook_result"] == "drained"
    assert spot["hook_evicted"] == 0, "the hook's invocation drained the node a second time"
    # Usually the hook's invocation finds the drain under way and waits for it; on a
    # loaded machine its process may start only once the drain is over, and then it
    # finds nothing to evict (tests/e2e/test_spot.py holds the drain to prove the wait).
    followed = "the drain begun by the spot-interruption event ended" in spot["hook_message"]
    assert followed or not spot["hook_message"], spot["hook_message"]
    # The hook's invocation completed the lifecycle action once the drain was over.
    assert summary["lifecycle"]["result"] == "CONTINUE"
    assert summary["lifecycle"]["closed_by"] == "complete"
    assert summary["all_non_daemonset_pods_evicted"] is True
    assert "EC2 sends a spot interruption warning for" in output
    assert "spot-interruption drain" in output
    assert output.splitlines()[0].startswith("eks-node-drainer demo: EC2 takes a spot instance")
    # Two end lines, each saying which event's it is: not two "drain finished", one
    # of them with "lifecycle result none".
    ends = [line for line in output.splitlines() if " lambda " in line and "finished" in line]
    assert len(ends) == 1, ends
    assert "spot-interruption drain finished: result drained; the terminate hook's" in ends[0]
    assert "terminate-hook: the node was already drained; lifecycle result CONTINUE" in output
    assert "lifecycle result none" not in output


def test_health_and_launch_hook__replacement_ready_first__retirement_drained_before_window(
    tmp_path: Path,
) -> None:
    """One run, both options: the replacement is held on the launch hook until its
    node is Ready, then AWS Health's retirement of the old node drains it."""
    summary, output = _run_demo(tmp_path, "--health", "--launch-hook", "--speed", "2")

    assert summary["checks_passed"] is True
    drain = summary["spot"]
    assert drain["trigger"] == "scheduled-change"
    assert drain["result"] == "drained"
    assert drain["drain_seconds"] < drain["window_seconds"] == 585
    assert drain["hook_evicted"] == 0
    assert summary["all_non_daemonset_pods_evicted"] is True
    assert "AWS Health schedules the retirement of" in output
    assert "scheduled-change drain" in output
    launch = summary["launch"]
    assert (launch["result"], launch["lifecycle_result"]) == ("joined", "CONTINUE")
    assert launch["released_after_registering"], "InService before its node registered"
    assert "waits in Pending:Wait on launch hook" in output


def test_warm_pool__drained_into_the_pool__back_through_the_launch_hook__schedulable(
    tmp_path: Path,
) -> None:
    summary, output = _run_demo(tmp_path, "--warm-pool", "--speed", "5")

    assert summary["checks_passed"] is True
    assert summary["drainer_result"] == "drained"
    assert summary["lifecycle"]["instance_state"] == "stopped", "kept, not terminated"
    assert summary["node_deleted"] is False
    warm = summary["warm_pool"]
    assert (warm["result"], warm["lifecycle_result"]) == ("joined", "CONTINUE")
    assert warm["schedulable"] and warm["released_after_booting"]
    assert "uncordoned" in warm["released"]
    assert "waits in Warmed:Pending:Wait on hook" in output
    assert "is back from the warm pool, Ready and schedulable" in output


def _plan_table(output: str) -> tuple[int, list[str]]:
    """The index of the plan's header line in the demo's output, and its rows."""
    lines = output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:3] == ["NODE", "PODS", "ETA"])
    return header, lines[header + 1 :]


def test_plan__table_printed_before_the_drain__forecast_within_a_quarter_of_the_drain(
    tmp_path: Path,
) -> None:
    summary, output = _run_demo(tmp_path, "--plan")

    assert summary["checks_passed"] is True, summary["checks"]
    assert summary["drainer_result"] == "drained"
    header, rows = _plan_table(output)
    lines = output.splitlines()
    invoked = next(i for i, line in enumerate(lines) if "invocation 1 of" in line)
    cordoned = next(i for i, line in enumerate(lines) if "cordoned" in line)
    assert header < invoked < cordoned, "the plan comes before the drain begins"
    assert "python -m drainer plan " + summary["node"] in lines[header - 1]
    assert rows[0].split()[:2] == [summary["node"], "5"], rows[0]
    assert rows[1].startswith("    nothing blocks; forecast"), rows[1]
    forecast = summary["forecast"]
    assert (forecast["node"], forecast["exit_code"], forecast["blockers"]) == (
        summary["node"],
        0,
        [],
    )
    eta, measured = forecast["eta_seconds"], forecast["measured_seconds"]
    print(f"forecast {eta} s, measured {measured} s")
    # The web budget's two evictions, one Ready replacement apart, then the critical
    # tier: seconds, not nothing.
    assert measured > 4
    assert abs(eta - measured) <= 0.25 * measured + 2, forecast
    [said] = [line for line in lines if line.lstrip().startswith("forecast ")]
    assert f"ETA {eta:.1f} s" in said and f"measured {measured:.1f} s" in said, said
    assert f"(forecast/measured {forecast['ratio']:.2f})" in said, said


def test_plan_with_stubborn_pdb__deadlock_and_its_fix_printed_before_the_drain(
    tmp_path: Path,
) -> None:
    summary, output = _run_demo(tmp_path, "--plan", "--stubborn-pdb")

    assert summary["checks_passed"] is True, summary["checks"]
    assert summary["drainer_result"] == "timed_out"
    header, rows = _plan_table(output)
    lines = output.splitlines()
    invoked = next(i for i, line in enumerate(lines) if "invocation 1 of" in line)
    assert header < invoked
    assert "(deadlock)" in rows[1] and "PodDisruptionBudget shop/billing" in rows[1], rows[1]
    assert "fix: scale the workload to 2 replicas" in rows[2], rows[2]
    forecast = summary["forecast"]
    assert forecast["exit_code"] == 1
    [blocker] = forecast["blockers"]
    assert blocker["budget"] == "shop/billing"


def test_plan_at_another_speed__refused_before_anything_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from demo.__main__ import parse_args

    with pytest.raises(SystemExit) as refused:
        parse_args(["--plan", "--speed", "10"])

    assert refused.value.code == 2
    assert "--plan: only at --speed 1" in capsys.readouterr().err


def test_spot_and_stubborn_pdb__refused_before_anything_starts(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "demo", "--spot", "--stubborn-pdb"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2
    assert "--spot and --stubborn-pdb" in completed.stderr


def test_stubborn_pdb_force_with_handovers__times_out_then_deletes_the_held_pod(
    tmp_path: Path,
) -> None:
    summary, output = _run_demo(
        tmp_path,
        "--speed",
        "10",
        "--stubborn-pdb",
        "--timeout-policy",
        "force",
        "--lambda-timeout",
        "64",
    )

    assert summary["checks_passed"] is True
    assert len(summary["invocations"]) >= 2, "a 64 s Lambda hands the drain over"
    assert summary["invocations"][-1]["handover"] >= 1
    assert summary["drainer_result"] == "timed_out"
    assert summary["drain_marker"]["ahead"] > 0  # the event's time set back
    assert summary["lifecycle"]["result"] == "CONTINUE"
    forced = summary["pods"]["forced"]
    assert [p for p in forced if p.startswith("shop/billing-")], forced
    assert "shop/db-0" in summary["pods"]["evicted"]
    timed_out = [line for line in output.splitlines() if " lambda " in line and "timed out" in line]
    assert len(timed_out) == 1, f"the timeout said once, with its policy: {timed_out}"
    assert "(TIMEOUT_POLICY=force)" in timed_out[0]
    budgets = summary["budgets"]
    assert budgets["shop/billing"]["worst_margin"] < 0, "force bypasses the budget"
    assert budgets["shop/web"]["worst_margin"] >= 0


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may hold spaces, so split after the last ')'.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_mid_drain__exits_promptly__no_server_left(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "demo", "--plain", "--logs", str(tmp_path / "logs")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    invoked = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if "invocation 1" in line:
                invoked.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert invoked.wait(90), "".join(lines)
        time.sleep(1.5)  # the function is draining now
        children = _children_of(process.pid)
        assert len(children) >= 3, f"kubesim, awssim and the function: {children}"

        process.send_signal(signal.SIGINT)
        status = process.wait(20)

        assert status == 130, "".join(lines)
        reader.join(5)
        assert "interrupted" in "".join(lines)
        assert [pid for pid in children if _alive(pid)] == []
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# --- the pieces -----------------------------------------------------------------------


def test_template__function_environment_is_every_setting_at_its_default() -> None:
    function = template.load("demo", "demo-workers")

    assert function.source == "template.yaml defaults"
    assert set(function.environment) == {v.name for v in VARIABLES}
    assert function.environment["CLUSTER_NAME"] == "demo"
    assert function.environment["ALLOWED_ASGS"] == "demo-workers"
    defaults = {v.name: v.default for v in VARIABLES}
    for name in ("DRAIN_TIMEOUT_SECONDS", "TIMEOUT_POLICY", "EVICT_DAEMONSET_PODS"):
        assert function.environment[name] == defaults[name]
    assert function.timeout_seconds == 900
    assert json.loads(function.hook.notification_metadata) == {"cluster_name": "demo"}


def test_template__missing__falls_back_to_drainer_settings(tmp_path: Path) -> None:
    function = template.load(
        "demo", "workers", tmp_path / "template.yaml", overrides={"TIMEOUT_POLICY": "force"}
    )

    assert function.source == "drainer.settings defaults"
    assert function.notes
    assert function.environment["TIMEOUT_POLICY"] == "force"
    assert function.environment["ALLOWED_ASGS"] == "workers"


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
        (
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]},
            {"app": "a"},
            True,
        ),
        (
            {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]},
            {"app": "a"},
            False,
        ),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {}, True),
        (None, {"app": "web"}, False),
    ],
)
def test_selects(selector: Any, labels: dict[str, str], expected: bool) -> None:
    assert selects(selector, labels) is expected


def _pod(
    name: str,
    *,
    uid: str,
    node: str = "n1",
    ready: bool = True,
    owner: Obj | None = None,
    terminating: bool = False,
) -> Obj:
    return objects.pod(
        name,
        namespace="shop",
        uid=uid,
        node_name=node,
        labels={"app": "web"},
        ready=ready,
        owner=owner,
        terminating=terminating,
    )


def test_budget_margins__count_ready_pods_not_terminating() -> None:
    budget = objects.budget("web", {"app": "web"}, namespace="shop", status={"desiredHealthy": 2})
    pods = [
        _pod("a", uid="1"),
        _pod("b", uid="2", terminating=True),
        _pod("c", uid="3", ready=False),
        _pod("d", uid="4"),
    ]

    assert budget_margins([budget], pods) == {"shop/web": (2, 2)}


def test_observer__eviction_then_replacement__matched_and_budget_worst_kept() -> None:
    view = View(open(os.devnull, "w"))  # noqa: SIM115 - closed with the view's stream
    observer = Observer(view)
    owner = {"kind": "ReplicaSet", "uid": "rs1", "controller": True, "name": "web-1"}
    budget = objects.budget("web", {"app": "web"}, namespace="shop", status={"desiredHealthy": 1})
    observer.sync_budgets([budget])
    observer.sync_pods(
        [
            _pod("web-a", uid="a", owner=owner),
            _pod("web-b", uid="b", node="n2", owner=owner),
        ]
    )
    observer.begin("n1")

    terminating = _pod("web-a", uid="a", owner=owner, terminating=True)
    observer.on_pod("MODIFIED", terminating)
    observer.on_pod("ADDED", _pod("web-c", uid="c", node="n2", ready=False, owner=owner))
    observer.on_pod("DELETED", terminating)
    observer.on_pod("MODIFIED", _pod("web-c", uid="c", node="n2", owner=owner))

    fate = observer.fates["a"]
    assert fate.evicted_at is not None and fate.gone_at is not None
    assert (fate.replacement, fate.replacement_node) == ("shop/web-c", "n2")
    assert observer.worst["shop/web"].margin == 0
    view.stream.close()


def test_classify__evictions_deletions_and_refusals_from_the_request_log() -> None:
    records = [
        {"method": "POST", "path": "/api/v1/namespaces/shop/pods/web-a/eviction", "status": 429},
        {"method": "POST", "path": "/api/v1/namespaces/shop/pods/web-a/eviction", "status": 201},
        {"method": "DELETE", "path": "/api/v1/namespaces/shop/pods/billing-x", "status": 200},
        {"method": "GET", "path": "/api/v1/namespaces/shop/pods/web-a", "status": 200},
        {"method": "PATCH", "path": "/api/v1/nodes/n1", "status": 200},
    ]

    found = classify(records)

    assert found.evicted == {"shop/web-a"}
    assert found.deleted == {"shop/billing-x"}
    assert found.refusals == {"shop/web-a": 1}


def test_view__plain__no_escapes_and_no_status_line(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    with path.open("w") as stream:
        view = View(stream)
        view.status("ignored")
        view.line("k8s", "node n1 cordoned", "ok")
        view.close()

    text = path.read_text()
    assert "\033" not in text
    assert text.endswith("k8s    node n1 cordoned\n")


def test_summary__pod_held_by_its_budget_died_with_the_node__not_called_never_violated() -> None:
    """--stubborn-pdb with TIMEOUT_POLICY=continue: no eviction broke a budget, but the
    held pod went with the terminated instance; the summary says both (a real run's
    summary.json)."""
    import io
    import json

    from demo.summary import render
    from demo.view import View

    summary = json.loads(
        (Path(__file__).parent / "data/demo_summary_stubborn_continue.json").read_text()
    )
    out = io.StringIO()

    render(View(out), summary)

    line = next(line for line in out.getvalue().splitlines() if line.lstrip().startswith("budgets"))
    assert "never violated by an eviction" in line, line
    assert "then shop/billing lost shop/billing-" in line, line
    assert "with the terminated node (TIMEOUT_POLICY=continue)" in line, line


def test_demo_sample__a_line_the_demo_no_longer_prints__stale_timings_and_names_aside() -> None:
    printed = (
        "   6.9s  k8s    node ip-10-235-51-220.ec2.internal cordoned (unschedulable)\n"
        "   7.0s  k8s    shop/web-76c137f95b-fh77x evicted: terminating (grace period 30 s)\n"
    )
    shown = [
        "   4.7s  k8s    node ip-10-100-69-254.ec2.internal cordoned (unschedulable)",
        "   4.8s  k8s    shop/web-76c137f95b-jt7c5 evicted: terminating (grace period 30 s)",
        "   4.8s  lambda tier 1: 4 pods (ordinary)",
        "  [...]",
    ]

    assert sample.stale(shown, printed) == ["   4.8s  lambda tier 1: 4 pods (ordinary)"]
