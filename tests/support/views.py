"""Views into a running part of drainer/ that only the tests need (issue 39, item 9):
whether a heartbeat's thread runs, how many tokens an EKS token source minted, a
watcher's first list. The package ships none of them; each reads what the object
already keeps, or counts from outside what the code does."""

from __future__ import annotations

from typing import Any

import boto3

from drainer.aws.heartbeat import Heartbeat
from drainer.engine.watchers import BudgetTracker


def heartbeat_running(heartbeat: Heartbeat) -> bool:
    """Whether the heartbeat's ticker thread is alive."""
    thread = heartbeat._thread
    return thread is not None and thread.is_alive()


class Mints:
    """How many EKS tokens a session's TokenSource minted: each is one presigned
    GetCallerIdentity, so the count is the session's STS signatures. Count before the
    source is built (its STS client takes the session's handlers as it is made)."""

    def __init__(self, session: boto3.Session) -> None:
        self.count = 0
        session.events.register("before-sign.sts.GetCallerIdentity", self._signed)

    def _signed(self, **_: Any) -> None:
        self.count += 1


def wait_listed(tracker: BudgetTracker, timeout: float) -> bool:
    """Wait until the watcher's first list is applied (or it failed or stopped, or
    `timeout`); True when its view holds what the API listed."""
    with tracker.cond:
        tracker.cond.wait_for(
            lambda: tracker.listed or tracker.error is not None or tracker.stopped, timeout
        )
        return tracker.listed
