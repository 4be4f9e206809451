"""What the tests share: one fake clock (`support.clock`), a CONNECT proxy, and the
rest; the Kubernetes object builders are testbed.workloads, shared with kubesim's
tests, the demo, the benchmarks and the soak.

A package in tests/, importable as `support` from every test directory: pytest puts
tests/ on sys.path for tests/conftest.py, as it does for tests/realapi.py."""
