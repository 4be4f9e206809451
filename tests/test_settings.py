"""Settings.from_env: defaults, parsing, ranges and the messages of bad values."""

from __future__ import annotations

import dataclasses
import json

import pytest

from drainer.errors import SettingsError
from drainer.lifecycle.settings import VARIABLES, Settings
from drainer.lifecycle.settings_drain import TimeoutPolicy
from drainer.lifecycle.settings_variable import Variable


def test_from_env__empty_environment__gives_documented_defaults() -> None:
    settings = Settings.from_env({})

    assert settings == Settings()
    assert settings.cluster_name == ""
    assert settings.allowed_asgs == frozenset()
    assert settings.drain_timeout_seconds == 3600
    assert settings.timeout_policy is TimeoutPolicy.CONTINUE
    assert settings.failure_result == "ABANDON"
    assert settings.eviction_concurrency == 32
    assert settings.evict_unreplicated_pods is True
    assert settings.evict_emptydir_pods is True
    assert settings.evict_daemonset_pods is False
    assert settings.grace_period_seconds == -1
    assert settings.force_grace_period_seconds == 30
    assert settings.stuck_pod_seconds == 60
    assert settings.volume_detach_timeout_seconds == 120
    assert settings.critical_reserve_seconds == 120
    assert settings.handover_margin_seconds == 60
    assert settings.global_timeout_margin_seconds == 60
    assert settings.kube_request_timeout_seconds == 10.0
    assert settings.dry_run is False
    assert settings.log_level == "INFO"


def test_from_env__every_variable_empty__gives_defaults__but_an_empty_list_is_empty() -> None:
    settings = Settings.from_env({v.name: "" for v in VARIABLES})
    assert settings == dataclasses.replace(Settings(), launch_startup_taints=frozenset())


def test_from_env__launch_startup_taints__empty_is_none__unset_is_the_default() -> None:
    """LaunchStartupTaints emptied in the stack waits for none of the three taints;
    the stack's default passes the default list itself."""
    assert Settings.from_env({"LAUNCH_STARTUP_TAINTS": ""}).launch_startup_taints == frozenset()
    assert Settings.from_env({"LAUNCH_STARTUP_TAINTS": " "}).launch_startup_taints == frozenset()
    assert Settings.from_env({}).launch_startup_taints == Settings().launch_startup_taints
    assert len(Settings().launch_startup_taints) == 3


@pytest.mark.parametrize(
    "variable", [v for v in VARIABLES if v.kind == "int"], ids=lambda v: v.name
)
def test_from_env__an_integer_with_a_decimal_point__is_read_when_whole(variable: Variable) -> None:
    """CloudFormation's Number parameters pass "5400.0" on as written."""
    value = f"{variable.default}.0"
    assert getattr(Settings.from_env({variable.name: value}), variable.field) == int(
        variable.default
    )
    assert isinstance(getattr(Settings.from_env({variable.name: value}), variable.field), int)


def test_variables__documented_default__equals_dataclass_default() -> None:
    defaults = Settings()
    for variable in VARIABLES:
        parsed = Settings.from_env({variable.name: variable.default})
        assert getattr(parsed, variable.field) == getattr(defaults, variable.field), variable


def test_variables__cover_every_field_once_with_description() -> None:
    fields = [f.name for f in dataclasses.fields(Settings)]
    assert [v.field for v in VARIABLES] == fields
    assert len({v.name for v in VARIABLES}) == len(VARIABLES)
    for variable in VARIABLES:
        assert variable.name.isupper()
        assert len(variable.description) > 20, variable.name


def test_variables__as_dict__is_json_for_generated_docs() -> None:
    rows = json.loads(json.dumps([v.as_dict() for v in VARIABLES]))

    by_name = {row["name"]: row for row in rows}
    assert by_name["DRAIN_TIMEOUT_SECONDS"]["default"] == "3600"
    assert by_name["DRAIN_TIMEOUT_SECONDS"]["minimum"] == 60
    assert by_name["DRAIN_TIMEOUT_SECONDS"]["maximum"] == 172800
    assert by_name["TIMEOUT_POLICY"]["choices"] == ["continue", "force", "abandon"]
    assert by_name["DRY_RUN"]["allowed"] == "true/false, 1/0, yes/no or on/off"


@pytest.mark.parametrize(
    ("variable", "raw", "field", "expected"),
    [
        ("CLUSTER_NAME", "prod-eu_1", "cluster_name", "prod-eu_1"),
        ("CLUSTER_NAME", "  prod  ", "cluster_name", "prod"),
        ("ALLOWED_ASGS", "a,b", "allowed_asgs", frozenset({"a", "b"})),
        ("ALLOWED_ASGS", " a , ,b ,", "allowed_asgs", frozenset({"a", "b"})),
        ("ALLOWED_ASGS", ",", "allowed_asgs", frozenset()),
        ("DRAIN_TIMEOUT_SECONDS", "60", "drain_timeout_seconds", 60),
        ("DRAIN_TIMEOUT_SECONDS", "172800", "drain_timeout_seconds", 172800),
        ("TIMEOUT_POLICY", "FORCE", "timeout_policy", TimeoutPolicy.FORCE),
        ("TIMEOUT_POLICY", "Abandon", "timeout_policy", TimeoutPolicy.ABANDON),
        ("FAILURE_RESULT", "continue", "failure_result", "CONTINUE"),
        ("EVICTION_CONCURRENCY", "1", "eviction_concurrency", 1),
        ("EVICTION_CONCURRENCY", "256", "eviction_concurrency", 256),
        ("EVICT_UNREPLICATED_PODS", "no", "evict_unreplicated_pods", False),
        ("EVICT_EMPTYDIR_PODS", "OFF", "evict_emptydir_pods", False),
        ("EVICT_DAEMONSET_PODS", "Yes", "evict_daemonset_pods", True),
        ("GRACE_PERIOD_SECONDS", "-1", "grace_period_seconds", -1),
        ("GRACE_PERIOD_SECONDS", "0", "grace_period_seconds", 0),
        ("FORCE_GRACE_PERIOD_SECONDS", "0", "force_grace_period_seconds", 0),
        ("STUCK_POD_SECONDS", "86400", "stuck_pod_seconds", 86400),
        ("VOLUME_DETACH_TIMEOUT_SECONDS", "0", "volume_detach_timeout_seconds", 0),
        ("CRITICAL_RESERVE_SECONDS", "0", "critical_reserve_seconds", 0),
        ("CRITICAL_RESERVE_SECONDS", "86400", "critical_reserve_seconds", 86400),
        ("HANDOVER_MARGIN_SECONDS", "5", "handover_margin_seconds", 5),
        ("GLOBAL_TIMEOUT_MARGIN_SECONDS", "0", "global_timeout_margin_seconds", 0),
        ("GLOBAL_TIMEOUT_MARGIN_SECONDS", "3600", "global_timeout_margin_seconds", 3600),
        ("KUBE_REQUEST_TIMEOUT_SECONDS", "2.5", "kube_request_timeout_seconds", 2.5),
        ("KUBE_REQUEST_TIMEOUT_SECONDS", "120", "kube_request_timeout_seconds", 120.0),
        ("DRY_RUN", "1", "dry_run", True),
        ("DRY_RUN", "TRUE", "dry_run", True),
        ("LOG_LEVEL", "debug", "log_level", "DEBUG"),
    ],
)
def test_from_env__valid_value__is_parsed(
    variable: str, raw: str, field: str, expected: object
) -> None:
    assert getattr(Settings.from_env({variable: raw}), field) == expected


@pytest.mark.parametrize("raw", ["true", "1", "yes", "on", "TRUE", "On", " yes "])
def test_from_env__truthy_spelling__is_true(raw: str) -> None:
    assert Settings.from_env({"DRY_RUN": raw}).dry_run is True


@pytest.mark.parametrize("raw", ["false", "0", "no", "off", "FALSE", "Off"])
def test_from_env__falsy_spelling__is_false(raw: str) -> None:
    assert Settings.from_env({"EVICT_EMPTYDIR_PODS": raw}).evict_emptydir_pods is False


@pytest.mark.parametrize(
    ("variable", "raw", "allowed"),
    [
        ("DRAIN_TIMEOUT_SECONDS", "59", "an integer from 60 to 172800"),
        ("DRAIN_TIMEOUT_SECONDS", "172801", "an integer from 60 to 172800"),
        ("DRAIN_TIMEOUT_SECONDS", "1h", "an integer from 60 to 172800"),
        ("DRAIN_TIMEOUT_SECONDS", "3600.5", "(not a whole number); expected an integer from 60"),
        ("DRAIN_TIMEOUT_SECONDS", "nan", "an integer from 60 to 172800"),
        ("DRAIN_TIMEOUT_SECONDS", "inf", "an integer from 60 to 172800"),
        ("DRAIN_TIMEOUT_SECONDS", "59.0", "(out of range)"),
        ("TIMEOUT_POLICY", "drop", "one of continue, force, abandon"),
        ("FAILURE_RESULT", "RETRY", "one of CONTINUE, ABANDON"),
        ("EVICTION_CONCURRENCY", "0", "an integer from 1 to 256"),
        ("EVICTION_CONCURRENCY", "257", "an integer from 1 to 256"),
        ("EVICT_UNREPLICATED_PODS", "maybe", "true/false, 1/0, yes/no or on/off"),
        ("EVICT_EMPTYDIR_PODS", "2", "true/false, 1/0, yes/no or on/off"),
        ("EVICT_DAEMONSET_PODS", "y", "true/false, 1/0, yes/no or on/off"),
        ("GRACE_PERIOD_SECONDS", "-2", "an integer from -1 to 86400"),
        ("FORCE_GRACE_PERIOD_SECONDS", "3601", "an integer from 0 to 3600"),
        ("STUCK_POD_SECONDS", "-1", "an integer from 0 to 86400"),
        ("VOLUME_DETACH_TIMEOUT_SECONDS", "3601", "an integer from 0 to 3600"),
        ("CRITICAL_RESERVE_SECONDS", "-1", "an integer from 0 to 86400"),
        ("CRITICAL_RESERVE_SECONDS", "1.5", "an integer from 0 to 86400"),
        ("GLOBAL_TIMEOUT_MARGIN_SECONDS", "-1", "an integer from 0 to 3600"),
        ("GLOBAL_TIMEOUT_MARGIN_SECONDS", "3601", "an integer from 0 to 3600"),
        ("HANDOVER_MARGIN_SECONDS", "4", "an integer from 5 to 600"),
        ("HANDOVER_MARGIN_SECONDS", "601", "an integer from 5 to 600"),
        ("KUBE_REQUEST_TIMEOUT_SECONDS", "0.5", "a number from 1 to 120"),
        ("KUBE_REQUEST_TIMEOUT_SECONDS", "nan", "a number from 1 to 120"),
        ("KUBE_REQUEST_TIMEOUT_SECONDS", "inf", "a number from 1 to 120"),
        ("KUBE_REQUEST_TIMEOUT_SECONDS", "ten", "a number from 1 to 120"),
        ("DRY_RUN", "dry", "true/false, 1/0, yes/no or on/off"),
        ("LOG_LEVEL", "TRACE", "one of DEBUG, INFO, WARNING, ERROR"),
        ("CLUSTER_NAME", "my cluster", "an EKS cluster name"),
        ("CLUSTER_NAME", "-leading-dash", "an EKS cluster name"),
        ("CLUSTER_NAME", "x" * 101, "an EKS cluster name"),
    ],
)
def test_from_env__invalid_value__names_variable_value_and_allowed(
    variable: str, raw: str, allowed: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({variable: raw})

    message = str(caught.value)
    assert caught.value.variable == variable
    assert message.startswith(f"{variable}: ")
    assert repr(raw.strip()) in message
    assert allowed in message


def test_from_env__launch_hook_named_as_the_terminate_hook__refused_saying_why() -> None:
    """A group holds one hook per name: each hook sync turned the terminate hook into
    the launch hook, and scale-ins terminated nodes undrained."""
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"LIFECYCLE_HOOK_NAME": "drain", "LAUNCH_HOOK_NAME": "drain"})

    assert caught.value.variable == "LAUNCH_HOOK_NAME"
    assert "the launch hook would replace the terminate hook" in str(caught.value)


def test_from_env__unrelated_variables__are_ignored() -> None:
    assert Settings.from_env({"PATH": "/bin", "AWS_REGION": "eu-west-1"}) == Settings()


def test_settings__is_frozen() -> None:
    settings = Settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.dry_run = True  # type: ignore[misc]


def test_describe__lists_every_field_as_json_values() -> None:
    settings = Settings.from_env({"ALLOWED_ASGS": "workers-b,workers-a", "TIMEOUT_POLICY": "force"})

    described = settings.describe()

    assert list(described) == [v.field for v in VARIABLES]
    assert described["allowed_asgs"] == ["workers-a", "workers-b"]
    assert described["timeout_policy"] == "force"
    assert described["drain_timeout_seconds"] == 3600
    json.dumps(described)


def test_describe__secret_variable__is_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    import drainer.lifecycle.settings as module

    secret = dataclasses.replace(VARIABLES[0], secret=True)
    monkeypatch.setattr(module, "VARIABLES", (secret, *VARIABLES[1:]))

    assert Settings(cluster_name="prod").describe()["cluster_name"] == "***"
    assert Settings(cluster_name="").describe()["cluster_name"] == ""


@pytest.mark.parametrize(
    ("variable", "allowed"),
    [
        (Variable("X", "x", "int", "1", "d", minimum=0, maximum=5), "an integer from 0 to 5"),
        (Variable("X", "x", "float", "1", "d", minimum=1, maximum=2.5), "a number from 1 to 2.5"),
        (Variable("X", "x", "names", "", "d"), "a comma-separated list, or empty"),
        (Variable("X", "x", "str", "", "d"), "a string"),
    ],
)
def test_variable__allowed__describes_the_accepted_values(variable: Variable, allowed: str) -> None:
    assert variable.allowed() == allowed
