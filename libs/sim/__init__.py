"""Simulation before rollout: traces, the same core decisions on a virtual clock, metrics."""
