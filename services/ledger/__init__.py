"""Ledger: owns the account tree (and, as it grows, budgets and usage); validates what is
applied to it and appends the changes."""
