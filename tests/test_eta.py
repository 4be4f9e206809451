"""The drain's live ETA (drainer/engine/pace.py) and its wiring: the arithmetic from
a forecast and what has gone, the fields the live lines carry, the forecast that
cannot be made (one warning, the drain goes on), the start and end Events, the end
line's forecast against actual, the metric of the error and the end notice."""

from __future__ import annotations

import contextlib
import io
import logging
import threading
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.metrics import emf_lines

from drainer.cli.display import Progress
from drainer.cli.pace import fields, said_against
from drainer.engine.context import DrainContext, RealWaits
from drainer.engine.options import DrainOptions
from drainer.engine.pace import Accuracy, Eta, NodeForecast
from drainer.engine.report import DrainEvent, DrainReport, Kind
from drainer.errors import KubeForbidden, KubeNotFound
from drainer.lifecycle import ending, notices, runner
from drainer.lifecycle.job import Run
from drainer.lifecycle.outcomes import Result
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.told import DrainStory
from drainer.plan import timing
from testbed import workloads as w

T0 = 1_000.0

# Three replicas under a budget of maxUnavailable 1: a wave every 5 s, each pod
# stopping 1 s after its eviction.
WAVES = NodeForecast(
    eta_seconds=11.0,
    paced_by="PodDisruptionBudget default/web: 3 waves (replacements Ready in ~4 s)",
    evicted={"default/a": 0.0, "default/b": 5.0, "default/c": 10.0},
    gone={"default/a": 1.0, "default/b": 6.0, "default/c": 11.0},
    budgets={"default/a": "default/web", "default/b": "default/web", "default/c": "default/web"},
)


def _eta(forecast: NodeForecast = WAVES) -> Eta:
    eta = Eta(forecast)
    eta.fields(DrainEvent(Kind.STARTED), T0)
    return eta


def test_eta__at_the_start__the_forecast_and_the_plans_words() -> None:
    eta = Eta(WAVES)

    fields = eta.fields(DrainEvent(Kind.STARTED), T0)

    assert fields == {"eta_seconds": 11.0, "paced_by": WAVES.paced_by}


def test_eta__on_time__counts_down() -> None:
    eta = _eta()
    eta.fields(DrainEvent(Kind.EVICTED, pod="default/a"), T0)
    fields = eta.fields(DrainEvent(Kind.GONE, pod="default/a"), T0 + 1)

    assert fields["eta_seconds"] == 10.0
    assert eta.remaining(T0 + 4) == 7.0


def test_eta__a_pod_gone_late__the_rest_shifted_by_as_much() -> None:
    eta = _eta()
    eta.fields(DrainEvent(Kind.GONE, pod="default/a"), T0 + 4)  # 3 s late

    assert eta.remaining(T0 + 4) == pytest.approx(11 + 3 - 4)


def test_eta__a_pod_gone_early__not_counted_as_early() -> None:
    eta = _eta()
    eta.fields(DrainEvent(Kind.GONE, pod="default/a"), T0 + 0.5)

    assert eta.remaining(T0 + 0.5) == pytest.approx(10.5)


def test_eta__the_last_pod_left_not_the_forecasts_last__its_budget_paces() -> None:
    eta = _eta()
    eta.fields(DrainEvent(Kind.GONE, pod="default/c"), T0 + 11)

    assert eta.paced_by() == "PodDisruptionBudget default/web"
    assert eta.remaining(T0 + 11) == 0.0  # b was due at 6 s: overdue, never negative


def test_eta__every_pod_gone__zero_nothing_left_and_the_actual_span() -> None:
    eta = _eta()
    for pod, at in (("default/a", 1.5), ("default/b", 7.0), ("default/c", 12.5)):
        fields = eta.fields(DrainEvent(Kind.GONE, pod=pod), T0 + at)

    assert fields == {"eta_seconds": 0.0, "paced_by": "nothing left"}
    assert eta.accuracy() == Accuracy(11.0, 12.5)
    assert eta.accuracy().error_seconds == pytest.approx(1.5)


def test_eta__a_pod_still_there__no_actual() -> None:
    eta = _eta()
    eta.fields(DrainEvent(Kind.GONE, pod="default/a"), T0 + 1)

    assert eta.accuracy() == Accuracy(11.0, None)
    assert eta.accuracy().error_seconds is None


def test_eta__only_the_live_lines_carry_it() -> None:
    eta = _eta()

    assert eta.fields(DrainEvent(Kind.REFUSED, pod="default/b", budget="default/web"), T0) == {}
    assert eta.fields(DrainEvent(Kind.STUCK, pod="default/b"), T0 + 2) == {}
    assert eta.remaining(T0 + 2) == 9.0  # b no longer waited for: c is the last


_TIMES = st.floats(min_value=0, max_value=1_000, allow_nan=False)


@st.composite
def _drains(draw: st.DrawFn) -> tuple[NodeForecast, list[tuple[str, float]]]:
    """A forecast of up to 8 pods and the order and times they go in."""
    count = draw(st.integers(min_value=0, max_value=8))
    names = [f"default/p{i}" for i in range(count)]
    gone = {name: draw(_TIMES) for name in names}
    evicted = {name: draw(st.floats(min_value=0, max_value=gone[name])) for name in names}
    order = draw(st.permutations(names))
    times = sorted(draw(st.lists(_TIMES, min_size=count, max_size=count)))
    forecast = NodeForecast(max(gone.values(), default=0.0), "x", evicted, gone)
    return forecast, list(zip(order, times, strict=True))


@given(_drains())
def test_eta__never_negative__zero_once_every_pod_is_gone(
    drain: tuple[NodeForecast, list[tuple[str, float]]],
) -> None:
    forecast, goes = drain
    eta = _eta(forecast)
    for pod, at in goes:
        assert eta.fields(DrainEvent(Kind.EVICTED, pod=pod), T0 + at)["eta_seconds"] >= 0
        assert eta.fields(DrainEvent(Kind.GONE, pod=pod), T0 + at)["eta_seconds"] >= 0

    assert eta.remaining(T0 + 2_000) == 0.0
    assert eta.paced_by() == "nothing left"
    assert eta.accuracy().actual_seconds == pytest.approx(goes[-1][1] if goes else 0.0)


@given(_drains(), st.lists(st.floats(min_value=0, max_value=100), min_size=8, max_size=8))
def test_eta__while_nothing_is_late__never_increases(
    drain: tuple[NodeForecast, list[tuple[str, float]]], slack: list[float]
) -> None:
    forecast, _ = drain
    eta = _eta(forecast)
    before, now = eta.remaining(T0), 0.0
    for i, pod in enumerate(sorted(forecast.gone, key=lambda p: forecast.gone[p])):
        # Each pod goes at its forecast time or earlier, the clock never going back.
        now = max(now, forecast.gone[pod] - slack[i])
        assert eta.remaining(T0 + now) <= before + 1e-9
        eta.fields(DrainEvent(Kind.GONE, pod=pod), T0 + now)
        later = eta.remaining(T0 + now)
        assert later <= before + 1e-9
        before = later


@given(_drains(), st.integers(min_value=0, max_value=3))
def test_eta__the_last_pod_left_kept_as_pods_go__as_a_scan_of_every_pod_left_says(
    drain: tuple[NodeForecast, list[tuple[str, float]]], ties: int
) -> None:
    # The ETA keeps its pods in order instead of scanning the pods left on every line
    # (a drain's lines cost its pods squared); what it says must be the scan's.
    forecast, goes = drain
    gone = dict(forecast.gone)
    for pod in list(gone)[:ties]:  # pods forecast to go at the same moment
        gone[pod] = 5.0
    forecast = NodeForecast(max(gone.values(), default=0.0), "the plan", forecast.evicted, gone)
    eta = _eta(forecast)
    left = dict(gone)
    for pod, at in goes:
        eta.fields(DrainEvent(Kind.GONE, pod=pod), T0 + at)
        left.pop(pod)
        if not left:
            break
        last = max(left, key=lambda p: (left[p], p))
        expected = "the plan" if gone[last] >= max(gone.values()) else f"the stop of {last}"
        assert eta.paced_by() == expected
        assert eta.remaining(T0 + at) == pytest.approx(max(0.0, left[last] + eta._late - at))


def test_context__the_eta_joins_the_live_lines_and_the_callback() -> None:
    seen: list[DrainEvent] = []
    ctx = DrainContext(
        kube=None,  # type: ignore[arg-type]
        node="n1",
        options=DrainOptions(),
        waits=RealWaits(lambda: T0),
        report=DrainReport("n1"),
        on_event=seen.append,
    )
    ctx.pace = Eta(WAVES).fields

    ctx.emit(Kind.STARTED, details={"node": "n1"})

    assert seen[0].fields() == {
        "event": "drain_started",
        "node": "n1",
        "eta_seconds": 11.0,
        "paced_by": WAVES.paced_by,
    }


def test_context__a_failing_eta__said_once__the_drain_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[Kind] = []

    def broken(event: DrainEvent, now: float) -> dict[str, Any]:
        calls.append(event.kind)
        raise ZeroDivisionError("bug")

    ctx = DrainContext(None, "n1", DrainOptions(), RealWaits(), DrainReport("n1"))  # type: ignore[arg-type]
    ctx.pace = broken

    ctx.emit(Kind.STARTED, details={"node": "n1"})
    ctx.emit(Kind.GONE, pod="default/a")

    assert calls == [Kind.STARTED]
    assert [r.message for r in caplog.records if "ETA failed" in r.message] == [
        "the drain's ETA failed; the drain goes on without one"
    ]


def _job(options: DrainOptions | None = None) -> Any:
    window = SimpleNamespace(deadline=SimpleNamespace(at=T0 + 600))
    return SimpleNamespace(
        window=window, approach=SimpleNamespace(options=options or DrainOptions())
    )


def _tools(forecaster: Any) -> Any:
    return SimpleNamespace(forecaster=forecaster, clock=lambda: T0)


def test_forecast__made_with_the_time_left__an_eta() -> None:
    asked: list[tuple[str, float, float, Any]] = []

    def forecaster(
        kube: Any,
        node: str,
        options: DrainOptions,
        *,
        timeout: float,
        now: float,
        listed: Any = None,
    ) -> NodeForecast:
        asked.append((node, timeout, now, listed))
        return WAVES

    listed: Any = ([{"metadata": {"name": "p"}}], [])
    tools = _tools(forecaster)
    eta = runner._eta(tools, None, "n1", _job(), listed=listed)  # type: ignore[arg-type]

    assert eta is not None and eta.forecast is WAVES
    assert asked == [("n1", 600.0, T0, listed)], "made from what the drain listed"


@pytest.mark.parametrize(
    ("raised", "said"),
    [
        (
            KubeForbidden("list pods in namespace default is forbidden"),
            "its forecast could not read the cluster: list pods in namespace default is forbidden",
        ),
        (ValueError("no budgets"), "its forecast failed: ValueError: no budgets"),
    ],
)
def test_forecast__fails__one_warning_no_eta(
    raised: Exception, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    def forecaster(*args: Any, **kwargs: Any) -> NodeForecast:
        raise raised

    with caplog.at_level(logging.WARNING):
        eta = runner._eta(_tools(forecaster), None, "n1", _job())  # type: ignore[arg-type]

    assert eta is None
    assert [r.getMessage() for r in caplog.records] == [
        f"no ETA for the drain of node n1: {said}; the drain goes on without one"
    ]


def test_forecast__too_slow__the_drain_starts_without_it(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "FORECAST_SECONDS", 0.05)
    release = threading.Event()

    def forecaster(*args: Any, **kwargs: Any) -> NodeForecast:
        release.wait(10)
        return WAVES

    try:
        with caplog.at_level(logging.WARNING):
            eta = runner._eta(_tools(forecaster), None, "n1", _job())  # type: ignore[arg-type]
    finally:
        release.set()

    assert eta is None
    assert [r.getMessage() for r in caplog.records] == [
        "no ETA for the drain of node n1: its forecast took longer than 0.05 s; "
        "the drain goes on without one"
    ]


class _Poster:
    folded = 0
    limit = 100

    def __init__(self) -> None:
        self.posted: list[tuple[str, str]] = []

    def post(self, regarding: Any, reason: str, action: str, note: str, **_: Any) -> None:
        self.posted.append((reason, note))


def test_story__start_event_says_the_eta_and_what_paces_it() -> None:
    poster = _Poster()
    story = DrainStory(poster, "n1", "uid", "terminate-hook")  # type: ignore[arg-type]
    details = {"ordinary": 3, "critical": 0, "deadline": "t", "deadline_source": "s"}

    story(DrainEvent(Kind.STARTED, eta_seconds=11.0, paced_by="PDB", details=details))
    story(DrainEvent(Kind.STARTED, details=details))  # no forecast: no ETA said

    (_, start), (_, without) = poster.posted
    assert start.endswith("(s); ETA ~11 s, paced by PDB"), start
    assert without.endswith("(s)"), without


def test_end_line_metric_and_notice__forecast_against_actual() -> None:
    run = Run(Result.DRAINED, cluster="prod", accuracy=Accuracy(11.04, 12.56))
    summary = ending.summary_of(run, "CONTINUE", True, 13.0)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ending._metrics(run, summary, Settings())

    assert (summary["forecast_seconds"], summary["actual_seconds"]) == (11.0, 12.6)
    (line,) = emf_lines(out.getvalue())
    assert line["ForecastErrorSeconds"] in (1.5, [1.5])  # powertools' EMF: a value or a list
    _, text, _ = notices.end_notice(SimpleNamespace(instance_id="i-1", asg_name="g"), summary)
    assert "Forecast: 11 s; took 13 s (2 s late)." in text


def test_end_line_and_metric__no_forecast__neither() -> None:
    run = Run(Result.DRAINED, cluster="prod")
    summary = ending.summary_of(run, "CONTINUE", True, 13.0)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ending._metrics(run, summary, Settings())

    assert "forecast_seconds" not in summary and "actual_seconds" not in summary
    (line,) = emf_lines(out.getvalue())
    assert "ForecastErrorSeconds" not in line


def test_cli_progress__the_eta_on_the_start_evicted_and_gone_lines() -> None:
    stream = io.StringIO()
    progress = Progress(stream, "n1")
    progress(DrainEvent(Kind.STARTED, eta_seconds=11.0, paced_by="PDB default/web", details={}))
    progress(DrainEvent(Kind.EVICTED, pod="default/a", eta_seconds=10.6, paced_by="x"))
    progress(DrainEvent(Kind.GONE, pod="default/a", seconds=1.0, eta_seconds=0.0, paced_by="x"))
    progress(DrainEvent(Kind.GONE, pod="default/b", seconds=1.0))  # no forecast: as before

    lines = [line.split("] ", 1)[1].strip() for line in stream.getvalue().splitlines()]
    assert lines == [
        "started  n1; ETA ~11 s, paced by PDB default/web",
        "evicted  default/a; ETA ~11 s",
        "gone  default/a after 1.0 s; ETA ~0 s",
        "gone  default/b after 1.0 s",
    ]


def test_cli_end__forecast_against_actual__a_line_and_the_documents_fields() -> None:
    eta = _eta()
    for pod, at in (("default/a", 1.0), ("default/b", 6.0), ("default/c", 12.4)):
        eta.ended(pod, T0 + at)
    out = io.StringIO()

    accuracy = said_against(eta, out)

    assert (
        out.getvalue() == "forecast 11 s; took 12 s from the drain's start to its last pod gone\n"
    )
    assert fields(accuracy) == {"forecast_seconds": 11.0, "actual_seconds": 12.4}
    assert said_against(None, out) is None and fields(None) == {}


@pytest.mark.parametrize(
    ("accuracy", "said"),
    [
        (Accuracy(11.0, 11.3), "Forecast: 11 s; took 11 s (as forecast)."),
        (Accuracy(20.0, 14.0), "Forecast: 20 s; took 14 s (6 s early)."),
        (Accuracy(11.0, None), "Forecast: 11 s (not every pod went: nothing to compare)."),
    ],
)
def test_end_notice__forecast_line_by_how_the_drain_went(accuracy: Accuracy, said: str) -> None:
    run = Run(Result.TIMED_OUT, cluster="prod", accuracy=accuracy)
    summary = ending.summary_of(run, "CONTINUE", True, 30.0)

    _, text, _ = notices.end_notice(SimpleNamespace(instance_id="i-1", asg_name="g"), summary)

    assert said in text.splitlines(), text


@pytest.mark.parametrize("kind", [Kind.STUCK, Kind.FORCED, Kind.WITH_NAMESPACE])
def test_eta__a_pod_that_did_not_go__no_actual_no_error(kind: Kind) -> None:
    """A drain whose pod was stuck, force-deleted or left to its namespace did not
    drain as forecast: no actual span, so no ForecastErrorSeconds on the dashboard."""
    eta = _eta()
    eta.fields(DrainEvent(Kind.GONE, pod="default/a"), T0 + 1)
    eta.fields(DrainEvent(kind, pod="default/b"), T0 + 300)
    eta.fields(DrainEvent(Kind.GONE, pod="default/c"), T0 + 301)

    assert eta.remaining(T0 + 301) == 0.0
    assert eta.accuracy() == Accuracy(11.0, None)


def _not_found(*args: Any, **kwargs: Any) -> Any:
    raise KubeNotFound("configmaps eks-node-drainer-observed not found")


def test_forecast_node__a_pod_that_never_goes__its_eta_the_timeout_not_nothing_left() -> None:
    """A single replica under minAvailable 1 never goes: the drain's live ETA counts
    down to the timeout while it is there, never 'nothing left' once the others went."""
    from drainer.plan.eta import forecast_node

    def pod(name: str, owner: dict[str, Any]) -> dict[str, Any]:
        """A Ready pod on n1 of `owner`, labelled app=<name up to its first '-'>."""
        app = name.split("-", maxsplit=1)[0]
        return w.pod(
            name,
            uid=name,
            node_name="n1",
            labels={"app": app},
            grace=2,
            owner=owner,
            phase="Running",
            ready=True,
        )

    owner = {"kind": "StatefulSet", "name": "x", "controller": True}
    web, api = pod("web-0", {**owner, "name": "web"}), pod("api-0", {**owner, "name": "api"})
    status = {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1}
    budget = w.budget("web", {"app": "web"}, min_available=1, status=status)
    kube = SimpleNamespace(
        list_pods_on_node=lambda node, selector: ([web, api], ""),
        list_budgets=lambda: ([budget], ""),
        list_pods_in=lambda namespace, off_node="": ([] if off_node else [web, api], ""),
        request=_not_found,
    )

    forecast = forecast_node(kube, "n1", DrainOptions(), timeout=600, now=0)  # type: ignore[arg-type]
    eta = Eta(forecast)
    eta.fields(DrainEvent(Kind.STARTED), T0)
    fields = eta.fields(DrainEvent(Kind.GONE, pod="default/api-0"), T0 + 2)

    assert forecast.eta_seconds == 600
    assert fields["eta_seconds"] == pytest.approx(598.0)
    assert fields["paced_by"] != "nothing left"
    assert eta.accuracy().actual_seconds is None


@pytest.mark.parametrize("selector", ["", "app=web"])
def test_forecast_node__the_nodes_pods_read_once__the_others_of_their_namespaces_beside(
    selector: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replacement times (asked for once a budget holds a pod of the node) come
    from every pod of the node's namespaces. Without a pod selector the node's own
    pods are not read twice: the namespace's list leaves them out (spec.nodeName!=).
    With one, the node's pods it leaves out are only in the namespace's whole list."""
    from drainer.plan import eta

    def ready(name: str, node: str, at: str) -> dict[str, Any]:
        app = name.split("-", maxsplit=1)[0]
        return w.pod(name, node_name=node, labels={"app": app}, owner="web",
                     ready=True, created="2026-11-22T00:00:00Z", ready_since=at)  # fmt: skip

    here, skipped = ready("web-1", "n1", "2026-11-22T00:00:04Z"), ready("db-1", "n1", "")
    there = ready("web-2", "n2", "2026-11-22T00:00:08Z")
    reads: list[tuple[str, str]] = []
    timed: list[list[str]] = []

    def pods_in(namespace: str, off_node: str = "") -> tuple[list[dict[str, Any]], str]:
        reads.append((namespace, off_node))
        return [p for p in (here, skipped, there) if p["spec"]["nodeName"] != off_node], ""

    def startups(cluster_pods: list[dict[str, Any]]) -> Any:
        timed.append(sorted(p["metadata"]["name"] for p in cluster_pods))
        return timing.startups(cluster_pods)

    on_node = [here] if selector else [here, skipped]
    kube = SimpleNamespace(
        list_pods_on_node=lambda node, selector: (on_node, ""),
        list_budgets=lambda: ([_allowing("web", 1)], ""),
        list_pods_in=pods_in,
        request=_not_found,
    )
    monkeypatch.setattr(eta, "startups", startups)

    forecast = eta.forecast_node(
        kube, "n1", DrainOptions(pod_selector=selector), timeout=600, now=T0
    )  # type: ignore[arg-type]

    assert reads == [("default", "" if selector else "n1")]
    assert timed == [["db-1", "web-1", "web-2"]]
    assert set(forecast.gone) == {f"default/{p['metadata']['name']}" for p in on_node}


def _allowing(app: str, allowed: int) -> dict[str, Any]:
    """A budget over the pods labelled app=`app`, as the disruption controller left it:
    `allowed` disruptions, every pod healthy."""
    status = {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 1}
    return w.budget(app, {"app": app}, max_unavailable=allowed, status=status)


def test_forecast_node__no_budget_holds_a_pod__the_times_to_ready_never_worked_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A replacement's time to Ready counts only in a budget: with none over the node's
    pods (a budget elsewhere in the namespace), the forecast neither reads the
    namespace's pods nor works their times out, and forecasts each pod in its grace
    period all the same."""
    from drainer.plan import eta

    asked: list[int] = []

    def startups(cluster_pods: list[dict[str, Any]]) -> Any:
        asked.append(len(cluster_pods))
        return timing.startups(cluster_pods)

    here = w.pod("web-1", node_name="n1", labels={"app": "web"}, owner="web", ready=True)
    kube = SimpleNamespace(
        list_pods_on_node=lambda node, selector: ([here], ""),
        list_budgets=lambda: ([_allowing("db", 1)], ""),
        list_pods_in=lambda namespace, off_node="": pytest.fail("the namespace read"),
        request=_not_found,
    )
    monkeypatch.setattr(eta, "startups", startups)

    forecast = eta.forecast_node(kube, "n1", DrainOptions(), timeout=600, now=T0)  # type: ignore[arg-type]

    assert asked == []
    assert forecast.gone == {"default/web-1": 30.0}


def test_forecast_node__the_times_to_ready_fail_to_be_worked_out__the_forecast_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fault while the times to Ready are worked out (a KeyError here) fails the
    forecast, as it did when they were worked out first; it never passes for a
    workload with no measured time (the ETA at the timeout, the reads done again)."""
    from drainer.plan import eta

    calls: list[int] = []

    def startups(cluster_pods: list[dict[str, Any]]) -> Any:
        calls.append(len(cluster_pods))
        raise KeyError("metadata")

    here = w.pod("web-1", node_name="n1", labels={"app": "web"}, owner="web", ready=True)
    kube = SimpleNamespace(
        list_pods_on_node=lambda node, selector: ([here], ""),
        list_budgets=lambda: ([_allowing("web", 1)], ""),
        list_pods_in=lambda namespace, off_node="": ([], ""),
        request=_not_found,
    )
    monkeypatch.setattr(eta, "startups", startups)

    with pytest.raises(KeyError, match="metadata"):
        eta.forecast_node(kube, "n1", DrainOptions(), timeout=600, now=T0)  # type: ignore[arg-type]
    assert calls == [1]


def test_forecast_node__from_what_the_drain_listed__the_same_forecast__no_list_again() -> None:
    """Given the drain's own lists (the node's pods, the budgets), the forecast reads
    neither again, and it is the one the same objects read from the cluster make."""
    from drainer.plan import eta

    on_node = [
        w.pod(f"web-{i}", node_name="n1", labels={"app": "web"}, owner="web") for i in range(3)
    ]
    budgets = [_allowing("web", 1)]
    lists: list[str] = []

    def listing(what: str, items: list[dict[str, Any]]) -> Any:
        return lambda *args: lists.append(what) or (items, "")

    kube = SimpleNamespace(
        list_pods_on_node=listing("pods", on_node),
        list_budgets=listing("budgets", budgets),
        list_pods_in=lambda namespace, off_node="": ([], ""),
        request=_not_found,
    )
    options = DrainOptions()

    read = eta.forecast_node(kube, "n1", options, timeout=600, now=T0)  # type: ignore[arg-type]
    assert lists == ["pods", "budgets"]
    given = eta.forecast_node(kube, "n1", options, timeout=600, now=T0, listed=(on_node, budgets))  # type: ignore[arg-type]

    assert lists == ["pods", "budgets"], "listed again"
    assert given == read
    assert given.budgets, "the budget's pacing is in the forecast"
