"""awssim: moto, plus what moto leaves out of an EKS node scale-in.

Test, demo and benchmark support; never shipped in the Lambda zip.

- lifecycle actions: instances in Terminating:Wait, CompleteLifecycleAction and
  RecordLifecycleActionHeartbeat with a ledger of the calls and fault injection;
- EKS: DescribeCluster pointed at a local API server;
- Lambda: asynchronous invocations queued instead of run;
- faults (throttling, 5xx) on any Auto Scaling or EC2 action (awssim.apifaults);
- EC2's LaunchTime: instances launched a day ago, moved by a restart (awssim.instances);
- DescribeScalingActivities: a group's launches, as a scenario gives them
  (awssim.activities).

In process: call `install()`, then use moto's `mock_aws()` and an `AwsSim`.
As a server: `python -m awssim serve [--port N]`, then point boto3 at it with
AWS_ENDPOINT_URL and drive it with `AwsSimClient`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

AMIS = Path(__file__).with_name("amis.json")
"""moto's catalogue of images, cut to the one the node groups launch
(awssim.world.AMI_ID). moto loads its whole catalogue, thousands of images per region,
each time it makes an EC2 backend: ~0.25 s of every test that makes one (and of every
demo, bench and soak world), for images nothing here reads. moto reads the path when
it is imported, so it is set here, before: a caller's own MOTO_AMIS_PATH wins."""
os.environ.setdefault("MOTO_AMIS_PATH", str(AMIS))

if TYPE_CHECKING:
    from awssim.sim import AwsSim, install

__all__ = ["AwsSim", "install"]


def __getattr__(name: str) -> Any:
    # moto takes seconds to import: only AwsSim and install need it, not the client.
    if name in __all__:
        from awssim import sim

        return getattr(sim, name)
    raise AttributeError(f"module 'awssim' has no attribute {name!r}")
