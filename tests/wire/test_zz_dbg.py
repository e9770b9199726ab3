from tests.wire.test_reliability import *
def test_dbg(apiserver, cluster):
    cluster.create(build_node("n1", cpu="4"))
    cluster.create(build_pod("big", cpu="6"))
    clock = ManualClock(1_700_000_000.0)
    sched = scheduler(cluster, clock, workers=2, throttle=WriteThrottle(min_gap=0.0))
    for _ in range(6):
        result = sched.run_once()
        print([ (type(e).__name__, getattr(e,'message',None) or getattr(getattr(e,'condition',None),'message',None)) for e in result.effects])
        print("cache", sched.cache.pods["default/big"].unschedulable)
        sched.binder.wait(writes=True)
        clock.advance(1)
    assert 0
