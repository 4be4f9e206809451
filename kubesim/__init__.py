"""kubesim: a Kubernetes API server emulator that the real kubectl and the official
Python client accept. For tests, the demo and the benchmarks; never shipped."""

from kubesim.auth import EksIdentity
from kubesim.cluster import DRAINER_GROUP, KubeSim

__all__ = ["DRAINER_GROUP", "EksIdentity", "KubeSim"]
