"""What a user runs against a snapshot or a cluster: replay, explain. They drive the same
Scheduler as production; there is no second loop."""
