"""Kafka share groups (KIP-932): the source, its settings, the group's acknowledgements,
the per-record progress and the crash journal."""
