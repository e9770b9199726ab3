"""`kaisched simulate`: a whole cluster in virtual time.

The memory backend, the real PodGrouper and the real scheduler run together
with emulated operators and an emulated kubelet on a scenario of node pools,
queues and job arrivals; invariants are checked after every session, and the
run ends in a report (tables or JSON) and optionally a plot.
"""
from kaisched.sim.scenario import JobKind, JobSpec, Scenario, ScenarioError, load_scenario, parse_scenario
from kaisched.sim.simulation import SimResult, Simulation

__all__ = ["JobKind", "JobSpec", "Scenario", "ScenarioError", "SimResult", "Simulation",
           "load_scenario", "parse_scenario"]
