"""The production loop: snapshot -> session -> actions -> effects, the binder
that writes them, leader election, the write throttle, metrics and health."""
