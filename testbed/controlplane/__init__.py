"""The real Kubernetes control plane as a test backend.

kube-apiserver, kube-controller-manager, kube-scheduler and etcd, built from their
published Go modules by build.sh beside this file, with kwok as the kubelets, all
on 127.0.0.1. It is the judge of what the drainer and kubesim believe about
Kubernetes: same objects, same requests, the real answers.
"""

from testbed.controlplane.binaries import ControlPlaneBuildError, binaries
from testbed.controlplane.harness import ControlPlane, ControlPlaneError

__all__ = ["ControlPlane", "ControlPlaneBuildError", "ControlPlaneError", "binaries"]
