"""What both controllers (the scheduler and the PodGrouper) run as processes:
Lease leader election, the /metrics, /healthz and /readyz endpoints, and the
outage lines. Neither controller's decisions live here."""
