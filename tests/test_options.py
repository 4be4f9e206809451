"""The engine's options (drainer/engine/options.py): its defaults are the Lambda's
documented ones, and each setting a user changes reaches the drain as they meant it."""

from __future__ import annotations

from typing import Any

import pytest

from drainer.engine.filters import FilterOptions
from drainer.engine.options import DrainOptions
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.settings_drain import TimeoutPolicy


def test_defaults__the_same_drain_whether_built_bare_or_from_default_settings() -> None:
    assert DrainOptions() == Settings().drain_options()


@pytest.mark.parametrize(
    ("setting", "value", "option", "expected"),
    [
        # kubectl's --grace-period: negative means each pod's own period.
        ("grace_period_seconds", -1, "grace_period_seconds", None),
        ("grace_period_seconds", 0, "grace_period_seconds", 0),
        ("grace_period_seconds", 45, "grace_period_seconds", 45),
        ("timeout_policy", TimeoutPolicy.FORCE, "force_on_timeout", True),
        ("timeout_policy", TimeoutPolicy.CONTINUE, "force_on_timeout", False),
        ("force_grace_period_seconds", 3, "force_grace_period_seconds", 3),
        ("eviction_concurrency", 7, "concurrency", 7),
        ("stuck_pod_seconds", 90, "stuck_pod_seconds", 90),
        ("critical_reserve_seconds", 15, "critical_reserve_seconds", 15),
        ("volume_detach_timeout_seconds", 5, "volume_detach_timeout", 5),
        ("dry_run", True, "dry_run", True),
        ("honor_do_not_disrupt", False, "honor_do_not_disrupt", False),
        ("honor_do_not_disrupt", True, "honor_do_not_disrupt", True),
    ],
)
def test_drain_options__each_setting_reaches_its_option(
    setting: str, value: Any, option: str, expected: Any
) -> None:
    options = Settings(**{setting: value}).drain_options()

    assert getattr(options, option) == expected


@pytest.mark.parametrize(
    ("settings", "filters"),
    [
        (Settings(), FilterOptions()),
        (
            Settings(evict_unreplicated_pods=False, evict_emptydir_pods=False),
            FilterOptions(evict_unreplicated=False, evict_emptydir=False),
        ),
        (Settings(evict_daemonset_pods=True), FilterOptions(evict_daemonset=True)),
    ],
    ids=["defaults", "strict", "daemonsets-too"],
)
def test_drain_options__the_filters_the_user_chose(
    settings: Settings, filters: FilterOptions
) -> None:
    assert settings.drain_options().filters == filters


def test_drain_options__what_only_a_terminal_sets_keeps_its_engine_default() -> None:
    options = Settings(dry_run=True, eviction_concurrency=3).drain_options()

    assert (options.pod_selector, options.trigger, options.fit_grace_to_deadline) == ("", "", False)
