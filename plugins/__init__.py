"""Scheduling plugins: each registers callbacks on the session, nothing more."""
