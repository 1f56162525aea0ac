"""Node agent: registers one (simulated) GPU host, runs the jobs admitted to it as process
groups, reports starts and exits, heartbeats, and reconciles with the log after a restart."""
