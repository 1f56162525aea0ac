"""Metrics: folds the log and serves what it says about the cluster on a Prometheus
endpoint (``/metrics``), computed by the simulator's own metric functions."""
