"""Review 62, template.yaml: ScheduledChangeLeadSeconds, whose text the stack's
condition compares and whose number the function reads."""

from __future__ import annotations

from deploy.cfn import Stack, load_template

from drainer.lifecycle.settings import Settings
from tools.deploy import check_value

BASE = {
    "ClusterName": "prod",
    "AsgNames": "nodes-a",
    "CodeS3Bucket": "code-bucket",
    "CodeS3Key": "drainer.zip",
}


def test_a_lead_written_otherwise_than_0_that_the_function_reads_as_0_is_refused():
    """SchedulesDrains compares the parameter's text with "0". "00", "0.0" or "0e3"
    passed the Number parameter's bounds, made the stack create the Scheduler's role and
    grant scheduler:CreateSchedule and iam:PassRole, and the function read 0 and never
    scheduled: permissions nobody used, the stack saying it schedules while it does
    not. The stack refuses such text; 0 and a whole number of seconds without a leading
    zero, up to 14 days, are taken."""
    spec = load_template()["Parameters"]["ScheduledChangeLeadSeconds"]
    for refused in ("00", "0.0", "0e3", "0600", "600.0", "-1", "1209601", "99999999", ""):
        assert check_value("ScheduledChangeLeadSeconds", refused, spec) is not None, refused
    for taken in ("0", "1", "600", "86400", "999999", "1000000", "1209599", "1209600"):
        assert check_value("ScheduledChangeLeadSeconds", taken, spec) is None, taken
        lead = Settings.from_env(
            {"CLUSTER_NAME": "prod", "SCHEDULED_CHANGE_LEAD_SECONDS": taken}
        ).scheduled_change_lead_seconds
        assert lead == int(taken)


def test_the_scheduler_is_set_up_exactly_when_the_function_schedules():
    for lead, schedules in (("0", False), ("600", True)):
        stack = Stack(BASE | {"ScheduledChangeLeadSeconds": lead})
        variables = stack.resource("DrainerFunction")["Environment"]["Variables"]
        assert bool(variables["SCHEDULER_ROLE_ARN"]) is schedules, lead
        assert ("SchedulerRole" in stack.resources()) is schedules, lead
