"""Property tests over the whole scheduler: hypothesis builds random clusters and checks
what must hold after every session (no node over-committed, gangs whole or untouched,
queues within their limits, the same input giving the same decisions...). They exercise
every action and plugin together, so they name no single module."""
