"""The fair shares the simulator shows are the ones the scheduler wrote on
the Queue objects: the report reads the statuses, not the plugin."""
from __future__ import annotations

from kaisched.api.resource import GPU
from kaisched.cache.convert.queues import queue_status
from kaisched.cluster.kinds import QUEUE
from kaisched.framework import SchedulerConfig
from kaisched.sim.runner import bundled
from kaisched.sim.scenario import load_scenario
from kaisched.sim.simulation import Simulation


def test_fair_shares_are_the_queue_statuses(config: SchedulerConfig) -> None:
    sim = Simulation(load_scenario(bundled()), config)
    sim.run()
    tl = sim.timeline
    for queue in tl.queues:
        status = queue_status((sim.cluster.get(QUEUE, "", queue) or {}).get("status"))
        assert status is not None
        assert tl.fair_share[queue][-1] == dict(status.fair_share)[GPU]
    # team-b reclaimed up to its share: at some moment its share was more than its use
    assert any(f > u for f, u in zip(tl.fair_share["team-b"], tl.queue_used["team-b"], strict=True))
