"""kubesim fixtures that several test modules share, each under the name `sim`: a
module imports the one it needs, which takes the place of conftest's default."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubesim import KubeSim

ONE_NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}


@pytest.fixture(name="sim")
def sim_with_a_node() -> Iterator[KubeSim]:
    """A kubesim at its own pace with one node, n1."""
    with KubeSim() as running:
        running.apply(ONE_NODE)
        yield running


@pytest.fixture(name="sim")
def fast_sim_with_a_node() -> Iterator[KubeSim]:
    """A kubesim at 20x speed with one node, n1 (the kubeconfig and credential tests)."""
    with KubeSim(speed=20.0) as running:
        running.apply(ONE_NODE)
        yield running
