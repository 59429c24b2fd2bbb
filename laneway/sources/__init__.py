"""Partitioned logs laneway reads from: the embedded log and Kafka."""
