"""Telemetry: watches node heartbeats (outside the log) and appends ``NodeLost`` when a
node has been silent longer than the timeout."""
