"""How a drain ended: the engine's outcomes, the only endings drainer/engine/ reports.
A trigger's result (drainer/lifecycle/outcomes.py's `Result`: these plus the endings
only a trigger reaches, e.g. not_allowed) is what the node's progress record (its
phase), the lifecycle action, the notice and the end log line (its `result`) say; one
table there maps each Outcome to its Result, of the same value.
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    DRAINED = "drained"
    """No pod left to evict (a fresh list agrees)."""
    NO_NODE = "no_node"
    """Nothing to drain: the instance has no node, or its node went away (or was
    replaced by another of the same name) during the drain."""
    TIMED_OUT = "timed_out"
    """The drain's own deadline passed with pods still there; TIMEOUT_POLICY applies."""
    HANDED_OVER = "handed_over"
    """This invocation's time ran out first: the drain goes on in the next one."""
    DRY_RUN = "dry_run"
    FAILED = "failed"
    """A fatal error stopped the drain (RBAC, no cluster, TLS...); the report names it."""
    INTERRUPTED = "interrupted"
    """A person stopped it (the CLI's Ctrl-C); the Lambda never interrupts its own drain."""
    RELEASED = "released"
    """Someone released the node mid-drain (`release`, a scheduled change's close: the
    drain's record removed): the drain stopped, leaving the node as the release left it."""


DRAINING = "draining"
"""The node's progress record while a drain is under way: not an ending."""
