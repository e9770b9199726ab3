"""What several actions share: making room by eviction, placement, topology domains and the
starvation guard (as KAI keeps its actions/common)."""
