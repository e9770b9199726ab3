"""`kaisched bench`: the performance scenarios and the API emulator they use."""

# Each scenario `kaisched bench` runs, with the line its --help shows (the figures are in
# docs/performance.md). A light module: the command line lists them without importing them.
BENCHES: dict[str, str] = {
    "basic-5k": "5,000 nodes, 10,000 single-pod jobs",
    "gang-5k": "5,000 nodes, 1,000 gangs of 8 and 3 gangs of 1,000",
    "preempt-1k": "1,000 full nodes, 100 high-priority gangs of 8 preempting",
    "reclaim-1k": "1,000 full nodes of one queue, 10 gangs of 8 reclaiming",
    "churn": "4,000 nodes, 140,000 pods: 1,000 finish, 1,000 arrive",
    "affinity-5k": "5,000 nodes in racks, gangs apart per host, pods spread",
    "scale-10k": "10,000 nodes, 300,000 pods: a steady cycle and the first one",
    "scale-50k": "50,000 nodes, 1,500,000 pods: scale-10k's mix five times over",
    "evict-50k": "scale-50k with team quotas: a gang reclaims, one preempts",
    "volumes-5k": "5,000 nodes with local PVs, 1,000 gangs of 8 claiming one each",
    "dra-1k": "1,000 nodes of 8 DRA GPUs, 1,000 gangs claiming them by CEL",
    "consolidation-1k": "1,000 full nodes, a gang of 8 that fits only once pods move",
    "autoscale-50k": "50,000 nodes, no 8 GPUs free on one, 200 gangs asked for",
    "gpu-share-5k": "5,000 nodes of 8 GPUs, 40,000 pods asking for part of one",
    "simulate": "kaisched simulate on 1,000 nodes and 2,000 generated jobs",
    "what-if-10k": "simulate --from-snapshot on the scale-10k cluster for an hour",
    "binds": "binds a second over HTTP to kmock's emulator, 1 to 128 binders",
    "failover-50k": "a standby following 50,000 nodes takes over (failover_seconds)",
    "list-10k": "scale-10k's objects listed over HTTP, page by page",
    "cold-50k": "a scheduler starting cold on scale-50k: to its first decision",
    "e2e": "kube-scheduler vs kaisched run on a real API server, 5,000 pods",
    "cluster-life": "a GPU cluster's day on hollow nodes, kaisched vs kube-scheduler",
}
