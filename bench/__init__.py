"""The drain benchmark: `python -m bench` (see bench/__main__.py), `make bench`.

Our engine and the real `kubectl drain` drain the same nodes side by side, on
kubesim (the default: figures from its request records, the drain window on the
server's clock) or on the real control plane (`--backend real`: figures from each
client's own request log on this host's clock), with each client's wall time and
peak memory from its own process."""
