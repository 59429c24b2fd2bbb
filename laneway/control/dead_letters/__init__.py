"""The failure path after a message's last attempt: the dead-letter router and its log
lines (the per-key circuit it keeps is :mod:`laneway.engines.circuit`, which the engines
check too)."""
