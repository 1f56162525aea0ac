"""Intake: validates submissions and cancellations and appends them; retries are harmless."""
