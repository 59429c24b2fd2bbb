"""The operator's commands: ``laneway lag`` (how far behind a group really is),
``laneway top`` (a live view of a group) and ``laneway dlq`` (list, show and replay dead
letters). They read the cluster (or a durable embedded log) with the connection settings
``laneway run`` uses; only ``dlq replay`` writes. See docs/guides/operating.md."""
