"""What a drain adds to its node, and what `release` takes away: only what the
drainer added itself, as its progress annotation records."""

from __future__ import annotations

import json
from typing import Any

import pytest

from drainer.k8s.cordon import (
    ADDED_CORDON,
    ADDED_LABEL,
    EXCLUDE_LB_LABEL,
    PROGRESS_ANNOTATION,
    ProgressRecord,
    added_by_drainer,
    cordon_patch,
    live_drain,
    release_patch,
)
from drainer.outcome import Outcome


def _node(
    *, unschedulable: bool = False, labels: dict[str, str] | None = None, progress: Any = None
) -> dict[str, Any]:
    annotations = {}
    if progress is not None:
        annotations[PROGRESS_ANNOTATION] = (
            progress if isinstance(progress, str) else json.dumps(progress)
        )
    return {
        "metadata": {"name": "n1", "labels": labels or {}, "annotations": annotations},
        "spec": {"unschedulable": unschedulable},
    }


def _apply(node: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386), as the API server applies it."""

    def merge(target: Any, change: Any) -> Any:
        if not isinstance(change, dict):
            return change
        out = dict(target) if isinstance(target, dict) else {}
        for key, value in change.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = merge(out.get(key), value)
        return out

    result: dict[str, Any] = merge(node, patch)
    return result


@pytest.mark.parametrize(
    ("unschedulable", "labels", "added"),
    [
        (False, {}, {ADDED_CORDON, ADDED_LABEL}),
        (True, {}, {ADDED_LABEL}),
        (False, {EXCLUDE_LB_LABEL: "true"}, {ADDED_CORDON}),
        (True, {EXCLUDE_LB_LABEL: "yes"}, set()),
    ],
    ids=["fresh", "cordoned-by-operator", "labelled-by-operator", "both-by-operator"],
)
def test_cordon_then_release__node_exactly_as_before(
    unschedulable: bool, labels: dict[str, str], added: set[str]
) -> None:
    before = _node(unschedulable=unschedulable, labels=dict(labels))
    patch, recorded = cordon_patch(before, now=1000.0)
    drained = _apply(before, patch)
    assert recorded == added
    assert drained["spec"]["unschedulable"] is True
    assert EXCLUDE_LB_LABEL in drained["metadata"]["labels"]

    undo, release = release_patch(drained)
    after = _apply(drained, undo)

    assert after == before
    assert f"removed annotation {PROGRESS_ANNOTATION}" in release.changed


def test_second_cordon__keeps_what_the_first_added() -> None:
    """A drain that runs again (a retry, a hand-over) finds its own cordon and label:
    they are still the drainer's, not the operator's."""
    first_patch, _ = cordon_patch(_node(), now=1.0)
    once = _apply(_node(), first_patch)
    second_patch, recorded = cordon_patch(once, now=2.0)
    assert recorded == {ADDED_CORDON, ADDED_LABEL}
    after, _ = release_patch(_apply(once, second_patch))
    assert after["spec"] == {"unschedulable": False}
    assert after["metadata"]["labels"] == {EXCLUDE_LB_LABEL: None}


def test_recordon__the_drains_cordon_from_then_on__the_begun_record_kept() -> None:
    """An operator's cordon, lifted mid-drain and put back by the drain: the record
    (the drain still under way, then its end) names that cordon as the drain's, and
    keeps what began the drain and its deadline."""
    record = ProgressRecord(trigger="spot-interruption")
    node = _apply(_node(unschedulable=True), record.begin(_node(unschedulable=True), 10, 130))
    assert ADDED_CORDON not in added_by_drainer(node)

    node = _apply(node, {**record.recordon(), "spec": {"unschedulable": True}})

    progress = json.loads(node["metadata"]["annotations"][PROGRESS_ANNOTATION])
    begun = {"phase": "draining", "trigger": "spot-interruption", "since": 10, "until": 130}
    assert progress == {**begun, "added": [ADDED_CORDON, ADDED_LABEL]}
    node = _apply(node, record.end(Outcome.DRAINED, 20, 1, cordoned=True))
    assert added_by_drainer(node) == {ADDED_CORDON, ADDED_LABEL}
    undo, _ = release_patch(node)
    assert _apply(node, undo)["spec"] == {"unschedulable": False}


@pytest.mark.parametrize("own_deadline", [True, False])
def test_begin__a_deadline_ec2_does_not_keep__recorded__read_by_the_follower(
    own_deadline: bool,
) -> None:
    """A late spot warning's drain has 120 s of its own, which EC2 does not keep: its
    record says so, and the terminate hook that follows it reads it (live_drain),
    to drain on where that drain timed out. A drain whose deadline is EC2's records
    nothing more (nor did earlier versions: a record without it is EC2's)."""
    record = ProgressRecord(trigger="spot-interruption", own_deadline=own_deadline)
    node = _apply(_node(), record.begin(_node(), 10, 130))

    progress = json.loads(node["metadata"]["annotations"][PROGRESS_ANNOTATION])
    assert ("own_deadline" in progress) is own_deadline
    live = live_drain(node, 20, frozenset({"spot-interruption"}))
    assert live is not None and live.own_deadline is own_deadline


def test_recordon_refused__the_end_not_told_it_took__no_cordon_claimed() -> None:
    """Review of d512e9f: the re-cordon's record claimed the cordon before its patch
    was known to have taken. Refused, and the operator's own cordon put back, the end
    record said the drain added it, and `release` undid the operator's cordon. The
    record keeps nothing of a re-cordon: the engine tells the end whether one took."""
    record = ProgressRecord(trigger="spot-interruption")
    node = _apply(_node(unschedulable=True), record.begin(_node(unschedulable=True), 10, 130))
    record.recordon()  # its patch refused: never applied

    node = _apply(node, record.end(Outcome.DRAINED, 20, 1))

    assert ADDED_CORDON not in added_by_drainer(node)
    undo, _ = release_patch(node)
    assert _apply(node, undo)["spec"] == {"unschedulable": True}


def test_release__no_record__nothing_to_undo() -> None:
    patch, release = release_patch(_node(unschedulable=True, labels={EXCLUDE_LB_LABEL: "true"}))
    assert patch == {}
    assert release.changed == []
    assert "nothing to undo" in release.kept[0]


def test_release__operator_cordon_kept__says_so() -> None:
    node = _node(
        unschedulable=True,
        labels={EXCLUDE_LB_LABEL: "true"},
        progress={"phase": "drained", "added": [ADDED_LABEL]},
    )
    patch, release = release_patch(node)
    assert "spec" not in patch
    assert release.changed[0] == f"removed label {EXCLUDE_LB_LABEL}"
    assert release.kept == ["cordoned before the drain: left cordoned"]


def test_release__drain_still_under_way__warns() -> None:
    _, release = release_patch(_node(unschedulable=True, progress={"phase": "draining"}))
    assert "sees the release and stops" in release.warning


@pytest.mark.parametrize(
    ("progress", "added"),
    [
        ({"phase": "drained", "at": 5, "evicted": 3}, {ADDED_CORDON, ADDED_LABEL}),
        ({"phase": "drained", "added": []}, set()),
        (None, set()),
        # Not a record the drainer wrote (empty, cut short, edited by hand, another
        # tool's): nothing is undone on its word. They meant both, and `release`
        # uncordoned a node an operator had cordoned.
        ("not json", set()),
        ("", set()),
        ("null", set()),
        ("[]", set()),
        ('"drained"', set()),
        ({"added": ["cordon"]}, set()),
    ],
    ids=[
        "older-version",
        "nothing-added",
        "no-annotation",
        "unreadable",
        "empty",
        "null",
        "a-list",
        "a-string",
        "no-phase",
    ],
)
def test_added_by_drainer__older_records_mean_both__unreadable_ones_nothing(
    progress: Any, added: set[str]
) -> None:
    assert added_by_drainer(_node(progress=progress)) == added


@pytest.mark.parametrize(
    "progress", ["not json", "", '{"added": ["cordon", "exclude-from-lb-label"]}']
)
def test_release__a_record_the_drainer_did_not_write__an_operators_cordon_and_label_kept(
    progress: str,
) -> None:
    node = _node(unschedulable=True, labels={EXCLUDE_LB_LABEL: "true"}, progress=progress)

    patch, release = release_patch(node)

    assert "spec" not in patch and "labels" not in patch["metadata"], patch
    assert release.changed == [f"removed annotation {PROGRESS_ANNOTATION}"]
    assert release.kept == [
        f"{PROGRESS_ANNOTATION} is not a record the drainer wrote: nothing on its word"
    ]


@pytest.mark.parametrize("phase", ["drained", "interrupted", "timed_out"])
def test_release__drain_over__no_warning(phase: str) -> None:
    _, release = release_patch(_node(unschedulable=True, progress={"phase": phase}))
    assert release.warning == ""
