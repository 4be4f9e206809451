"""What the tests share: one fake clock (`support.clock`) and one set of Kubernetes
object builders (`support.objects`).

A package in tests/, importable as `support` from every test directory: pytest puts
tests/ on sys.path for tests/conftest.py, as it does for tests/realapi.py."""
