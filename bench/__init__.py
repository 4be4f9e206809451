"""The drain benchmark: `python -m bench` (see bench/__main__.py), `make bench`.

Our engine and the real `kubectl drain` drain the same kubesim nodes side by side;
the figures come from kubesim's request records (the drain window on the server's
clock) and from each client's own process (wall time, peak memory)."""
