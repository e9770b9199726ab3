"""Scheduling actions: each asks the session and changes it through statements."""
