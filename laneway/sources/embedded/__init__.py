"""The embedded log: an in-process partitioned log with consumer groups, durable segments
and transactions."""
