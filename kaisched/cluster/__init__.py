"""The cluster API seam: the ClusterClient protocol and its backends."""
from kaisched.cluster.client import ClusterClient, Obj, Subscription, WatchEvent
from kaisched.cluster.kinds import Kind, kind_for, kind_of

__all__ = ["ClusterClient", "Kind", "Obj", "Subscription", "WatchEvent", "kind_for", "kind_of"]
