"""Allot's services, each a separate process: ``python -m allot.services.<name>``.

A service folds the log with ``allot.core`` into its own projection and appends events; it
shares nothing with the others but the log.
"""
