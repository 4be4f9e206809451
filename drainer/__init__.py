"""eks-node-drainer: drains an EKS node before its Auto Scaling group terminates it."""

__version__ = "0.2.0"
"""The one version: the wheel's (pyproject.toml reads it), the zip manifest's, the
stack's `Version` output and the function's log line at start-up."""
