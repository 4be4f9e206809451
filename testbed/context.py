"""A Lambda-like invocation context: the attributes and the one method the handler
uses, with a real deadline."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field


@dataclass
class LambdaContext:
    timeout_seconds: float = 900.0
    function_name: str = "eks-node-drainer"
    region: str = "us-east-1"
    account: str = "123456789012"
    memory_limit_in_mb: int = 512
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started: float = field(default_factory=time.monotonic)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{self.account}:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return f"{time.strftime('%Y/%m/%d')}/[{self.function_version}]{self.aws_request_id[:8]}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.started + self.timeout_seconds - time.monotonic()) * 1000))
