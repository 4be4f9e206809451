"""Evicted pods' IPs given out again: which pod on another node holds one now.

In a target group of type ip (drainer/lifecycle/targets.py) an evicted pod's IP may
already be another pod's: the VPC gave it out again, and the load balancer
controller registered the new pod under it. That target is not the drain's to take
out, nor to wait for. `IpsHeld` asks the cluster (the runner's `holder`: a pod off
the drained node, not hostNetwork, not finished, whose status.podIP is the IP) before
an IP is deregistered, and again when the wait sees its target registered once more
after the drain deregistered it (the reuse happened during the deregistration delay).
When the cluster cannot be asked, the IP counts as the evicted pod's: it is taken out,
as before the question was asked, said once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

log = logging.getLogger("drainer.lifecycle.targets")


@dataclass
class IpsHeld:
    """The answers of one try of taking the targets out (a new try asks again: the pod
    that held an IP may be gone since), and what was left registered (`reused`)."""

    holder: Callable[[str], str] | None
    evicted: Mapping[str, str]
    """IP -> the evicted pod that had it."""
    ip_groups: set[str] = field(default_factory=set)
    """The target groups of type ip (their targets are IPs)."""
    reused: dict[str, str] = field(default_factory=dict)
    """IP -> the pod on another node that holds it now: left registered."""
    asked: dict[str, str] = field(default_factory=dict)
    failed: bool = False
    warned: bool = False

    def __call__(self, ip: str) -> bool:
        """Whether a pod on another node holds `ip` now (asked once per try)."""
        if self.holder is None or self.failed:
            return False
        if ip not in self.asked:
            try:
                self.asked[ip] = self.holder(ip)
            except Exception as e:  # the question only spares a target; never the wait
                self.failed = True
                self._cannot_ask(e)
                return False
            if self.asked[ip]:
                self._held(ip)
        return bool(self.asked[ip])

    def again(self, ip: str) -> bool:
        """Whether a pod on another node holds `ip` now, asked afresh: its target is
        registered again since the drain deregistered it."""
        self.asked.pop(ip, None)
        self.failed = False
        return self(ip)

    def _held(self, ip: str) -> None:
        self.reused[ip] = self.asked[ip]
        log.warning(
            "%s, the IP of evicted pod %s, is held now by pod %s on another node: left "
            "registered in its IP target groups, not waited for",
            ip,
            self.evicted.get(ip, "?"),
            self.asked[ip],
            extra={"reused_ip": ip, "held_by": self.asked[ip]},
        )

    def _cannot_ask(self, error: Exception) -> None:
        if self.warned:
            return
        self.warned = True
        log.warning(
            "could not ask the cluster which pods hold the evicted pods' IPs (%s): they are "
            "taken out of their IP target groups without that check",
            error,
        )
