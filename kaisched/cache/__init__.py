"""The scheduler's view of the cluster, fed by watch events."""
from kaisched.cache.cache import Cache

__all__ = ["Cache"]
