"""How `kaisched run` writes to the API server unless told otherwise: read
by its command line (light to import: nothing else loads with it) and by the
benches that time it as it runs."""
from __future__ import annotations

QPS, BURST = 1000.0, 2000   # writes a second on average, and at once above that
# Requests in flight at once. The API server and etcd answer many concurrent
# binds faster than few (etcd commits them together): on a loopback server
# 5,000 binds took 3.1-3.3 s with 128, 3.5-4.2 s with 32.
BINDERS = 128
# Pods in the first lists from which the first leader takes a head start
# (runtime.headstart: the first gangs bound before all is converted; 0: never).
# Below, converting everything takes a few seconds at most.
HEAD_START_PODS = 100_000
