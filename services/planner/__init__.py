"""Planner: folds the log, decides admissions with ``allot.core.plan``, appends the plan."""
