"""A drain run by hand, told in Kubernetes Events as the Lambda tells its own: the
same story (drainer/lifecycle/told.py) through the same poster (drainer/k8s/events.py),
so that `kubectl describe node` shows a teammate who drains the node (the kubeconfig
user and the host, in the start Event and as every Event's reportingInstance) and
how it ended. Loaded once a drain begins, not on the CLI's start-up.

Never fatal: without the RBAC rule for Events the poster stops at the first 403 and
its one warning line reaches stderr through the CLI's log handler; the drain goes
on. A dry run writes no Event.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from drainer.engine.report import DrainEvent, DrainReport
from drainer.k8s.events import EventPoster
from drainer.k8s.kube import Kube
from drainer.lifecycle.told import DrainStory

TRIGGER = "cli"
"""What began the drain, as the node's Events and progress record name it."""
FLUSH_SECONDS = 2.0
"""How long the drain's end waits for its last Events (the end Event): the process
exits after the verdict, and an Event still queued then is lost."""


def who(user: str, host: str) -> tuple[str, str]:
    """Who runs the drain: in words, for the start Event, and as the Events'
    reportingInstance (at most 128 characters, as the API takes it)."""
    said = f"kubeconfig user {user}" if user else "no kubeconfig user"
    return f"{said} on host {host}", f"{user or '-'}@{host}"[:128]


class CliStory:
    """The drain's on_event callback: the Events, then `then` (the terminal's progress)."""

    def __init__(
        self,
        kube: Kube,
        node: str,
        node_uid: str,
        then: Callable[[DrainEvent], None],
        *,
        host: str = "",
    ) -> None:
        said, instance = who(kube.user, host or socket.gethostname() or "localhost")
        self.poster = EventPoster(kube, instance=instance)
        self.story = DrainStory(self.poster, node, node_uid, TRIGGER, by=said)
        self.then = then

    def __call__(self, event: DrainEvent) -> None:
        self.story(event)
        self.then(event)

    def end(self, report: DrainReport) -> None:
        """The end Event of a drain that ran to its end (drained, timed out, failed or
        interrupted)."""
        self.story.ended(report, lambda outcome: None)  # no Auto Scaling group to tell

    def close(self) -> None:
        """No more Events; the last ones sent within FLUSH_SECONDS, before the verdict
        (a warning that they are not posted is printed before it too)."""
        self.poster.close(FLUSH_SECONDS)
