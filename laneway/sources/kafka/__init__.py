"""Kafka consumer groups: the source, its client settings, assignment, positions, producer
and transactions (confluent-kafka)."""
