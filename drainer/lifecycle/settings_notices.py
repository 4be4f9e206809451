"""The variables of what the function tells beside its work: the SNS notices of a
drain's start and end, and the level of its own logs.

Each is the metadata of one `Settings` field (drainer/lifecycle/settings.py).
"""

from __future__ import annotations

from drainer.lifecycle.settings_variable import env

NOTIFICATION_TOPIC_ARN = env(
    "NOTIFICATION_TOPIC_ARN",
    "str",
    "",
    "An SNS topic told, in a short message for people, when a drain ends, fails "
    "or times out (instance, node, result, duration, budgets, pods left). Empty: "
    "no notices.",
)

NOTIFY_ON_START = env(
    "NOTIFY_ON_START",
    "bool",
    "false",
    "Tell NOTIFICATION_TOPIC_ARN when a drain starts too.",
)

LOG_LEVEL = env(
    "LOG_LEVEL",
    "choice",
    "INFO",
    "Level of the drainer's own logs.",
    choices=("DEBUG", "INFO", "WARNING", "ERROR"),
)
