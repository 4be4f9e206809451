"""Review 58, template.yaml's parameters: what the stack accepts for each, what it puts
in the function's environment, and what the function (drainer/lifecycle/settings*.py),
AWS and the documentation then make of it. Each test shows what the operator sees go
wrong."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from deploy.cfn import Stack, load_template

from drainer.errors import SettingsError
from drainer.lifecycle.settings import VARIABLES, Settings
from tools.deploy import check_value
from tools.settings_table import parameter_for

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference.md"


def _stack(**parameters: str) -> Stack:
    base = {
        "ClusterName": "prod",
        "AsgNames": "nodes-a,nodes-b",
        "CodeS3Bucket": "code-bucket",
        "CodeS3Key": "drainer.zip",
    }
    return Stack(base | parameters)


def _environment(stack: Stack) -> dict[str, str]:
    variables = stack.resource("DrainerFunction")["Environment"]["Variables"]
    return {name: str(value) for name, value in variables.items()}


# --- 1. a FIFO topic as FailureTopicArn -------------------------------------------------------


def test_failure_topic_arn__a_fifo_topic_is_refused():
    """FailureTopicArn's AllowedPattern takes a '.fifo' topic on purpose, and the stack
    then makes it the on-failure destination of every asynchronous invocation (in place
    of FailedEventsQueue). Lambda cannot deliver to an SNS FIFO topic (its documentation,
    "Capturing records of Lambda asynchronous invocations": only a standard topic; a FIFO
    one gives DestinationDeliveryFailures). So a drain that crashed three times (a
    terminate event, a spot warning, a hand-over) is lost without a trace: not in the
    topic, not in the queue, and FailedEventsAlarm, which watches the queue, stays OK."""
    template = load_template()
    spec = template["Parameters"]["FailureTopicArn"]
    fifo = "arn:aws:sns:eu-west-1:123456789012:drainer-failures.fifo"

    destination = _stack(FailureTopicArn=fifo).resource("AsyncInvokeConfig")
    assert destination["DestinationConfig"]["OnFailure"]["Destination"] == fifo  # as it is

    assert check_value("FailureTopicArn", fifo, spec) is not None, (
        "the stack accepts a FIFO topic as the destination of failed invocations, "
        "which Lambda cannot deliver to"
    )


# --- 2. a whole number written with a decimal point -------------------------------------------


def test_integer_settings__a_whole_number_the_stack_accepts_is_one_the_function_reads():
    """Every integer setting is a parameter of Type Number, which CloudFormation (and
    make deploy's own check, tools/deploy.py check_value) accepts as an integer or a
    float; Ref hands the function the text as given. A params file written by a program
    ({"DrainTimeoutSeconds": 5400.0}: tools/deploy.py turns it into "5400.0") or a value
    typed as 5400.0 deploys, and then every invocation of the function fails at cold
    start with a SettingsError (int("5400.0")). On a stack update that leaves the hooks'
    properties alone the custom resource is not even asked, so the update completes;
    the next terminated node is not drained."""
    template = load_template()
    refused = []
    for variable in VARIABLES:
        if variable.kind != "int":
            continue
        parameter = parameter_for(variable.name)
        spec = template["Parameters"][parameter]
        value = f"{variable.default}.0"
        if spec["Type"] == "String":  # its pattern refuses the point (review 62): none to read
            assert check_value(parameter, value, spec) is not None
            continue
        assert check_value(parameter, value, spec) is None  # the template's rules pass it
        environment = _environment(_stack(**{parameter: value}))
        assert environment[variable.name] == value
        try:
            Settings.from_env(environment)
        except SettingsError as e:
            refused.append(f"{parameter}={value}: {e}")
    assert refused == []


# --- 3. many named groups ---------------------------------------------------------------------

EVENT_PATTERN_LIMIT = 2048
"""EventBridge's quota on an event pattern's size, in characters (adjustable to 4096)."""


def test_asg_names__as_many_as_you_like__the_terminate_rule_still_fits_eventbridge():
    """AsgNames promises "as many as you like" (template.yaml, docs/reference.md); a
    test keeps 40 (test_policy_names_every_listed_group__no_limit). Without AsgTag the
    TerminateRule (and LaunchRule) pattern lists every name, and EventBridge refuses a
    pattern over 2048 characters: 40 self-managed groups named as eksctl names them
    (about 55 characters) make a pattern of 2,405 at the least, and the stack fails to create
    (or an update that adds groups rolls back). The function needs no such filter: it
    refuses an event of a group neither listed nor tagged (as it does with AsgTag)."""
    names = [f"eksctl-prod-eu-nodegroup-ng-{i:02d}-NodeGroup-1A2B3C4D5E6F" for i in range(40)]
    stack = _stack(AsgNames=",".join(names))
    assert (
        check_value("AsgNames", ",".join(names), load_template()["Parameters"]["AsgNames"]) is None
    )

    pattern = stack.resource("TerminateRule")["EventPattern"]
    size = len(json.dumps(pattern, separators=(",", ":")))  # the smallest it can be
    assert size <= EVENT_PATTERN_LIMIT, f"TerminateRule's event pattern is {size} characters"


# --- 4. LaunchStartupTaints emptied ----------------------------------------------------------


def test_launch_startup_taints__empty_waits_for_none_of_them():
    """docs/reference.md says LAUNCH_STARTUP_TAINTS allows "a comma-separated list, or
    empty", and the parameter's description lists the taints the launch hook waits for.
    An operator who empties LaunchStartupTaints (none of the three agents' taints is
    removed on their nodes: the advice a not-joined notice gives is "take it out of
    LAUNCH_STARTUP_TAINTS") gets the three defaults back: Settings.from_env reads an
    empty variable as its default. New nodes keep waiting for those taints, time out,
    and are ABANDONed (LaunchTimeoutResult's default), which stops an instance refresh."""
    environment = _environment(_stack(LaunchStartupTaints=""))
    settings = Settings.from_env(environment)
    assert settings.launch_startup_taints == frozenset()


# --- 5. the settings table's template parameters ---------------------------------------------


def test_reference__every_template_parameter_it_names_is_the_templates():
    """docs/reference.md's settings table has a "Template parameter" column, generated
    by tools/settings_table.py's parameter_for. For SCHEDULER_ROLE_ARN and STACK_ID,
    which the stack sets from its own resources, it names `SchedulerRoleArn` and
    `StackId`: no such parameters exist (make deploy StackId=... is refused as an
    unknown parameter)."""
    parameters = set(load_template()["Parameters"])
    table = REFERENCE.read_text().split("## Settings", 1)[1].split("## Parameters", 1)[0]
    named: dict[str, str] = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and re.fullmatch(r"`[A-Z0-9_]+`", cells[0]):
            named[cells[0].strip("`")] = cells[1].strip("`")
    assert named, "no settings table found"
    unknown: dict[str, Any] = {
        variable: parameter for variable, parameter in named.items() if parameter not in parameters
    }
    assert unknown == {}


# --- ReservedConcurrency written with a leading zero ---------------------------------------


def test_reserved_concurrency__a_leading_zero_is_refused__zero_and_empty_unreserve():
    """A value of "00" passed "[0-9]{0,5}", and HasReservedConcurrency, which compares with "" and
    "0", took it for a number to reserve: ReservedConcurrentExecutions 0, a function
    that never runs. Every terminate hook then timed out to its DefaultResult, every
    node terminated undrained. The stack refuses such a value; "", "0" and a number
    without a leading zero are taken."""
    spec = load_template()["Parameters"]["ReservedConcurrency"]

    for refused in ("00", "007", "0100"):
        assert check_value("ReservedConcurrency", refused, spec) is not None, refused
    for taken in ("", "0", "5", "100", "10000"):
        assert check_value("ReservedConcurrency", taken, spec) is None, taken
    assert "ReservedConcurrentExecutions" not in _stack(ReservedConcurrency="0").resource(
        "DrainerFunction"
    )
