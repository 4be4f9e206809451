"""The refresh plan (issue 40): before a drain, how long each node will take and
what will block it, from the engine's own decisions run against a forecast clock.
Read-only: it lists, it never writes."""
