"""The scheduler's view of the cluster, fed by watch events."""
from kaisched.cache.store import Cache

__all__ = ["Cache"]
