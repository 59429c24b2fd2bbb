"""The ``spike`` and ``paced`` benchmarks: open-loop reservations on Kafka and PostgreSQL
through ``laneway run`` topologies (one run, its processes, the servers, the rows)."""
