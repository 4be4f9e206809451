"""testbed: kubesim and awssim wired into one emulated EKS cluster with a
self-managed node group, for the end-to-end tests, the demo and the benchmarks.
Never shipped in the Lambda zip."""

from testbed.context import LambdaContext
from testbed.world import World

__all__ = ["LambdaContext", "World"]
