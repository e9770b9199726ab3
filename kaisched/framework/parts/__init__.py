"""What a session is built from, one concern each: the NonStrict holds
(holds.py), the enqueue gate (gate.py), consolidation's moves (moves.py),
the room held for starving gangs (starving.py) and what the
PodDisruptionBudgets let it evict (disruptions.py). The session owns one of
each; actions and plugins change them only through their methods and read
them through read-only views. None of them names the session."""
from kaisched.framework.parts.disruptions import Disruptions
from kaisched.framework.parts.gate import Gate
from kaisched.framework.parts.holds import Holds
from kaisched.framework.parts.moves import Moves
from kaisched.framework.parts.starving import StarvingRoom

__all__ = ["Disruptions", "Gate", "Holds", "Moves", "StarvingRoom"]
