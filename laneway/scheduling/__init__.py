"""Ordering lanes, offset tracking and backpressure: the consumer's control plane logic."""
