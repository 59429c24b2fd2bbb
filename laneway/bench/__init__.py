"""``laneway bench``: the benchmark suite that shows which engine fits which workload.

The command layer sits here: the click commands (:mod:`~laneway.bench.command`, with the
subcommands of :mod:`~laneway.bench.tools`), how their options are read
(:mod:`~laneway.bench.option_parsing`) and one invocation from plan to JSON
(:mod:`~laneway.bench.runner`). Below it, a folder per kind of measurement and the
reporting they share:

* :mod:`~laneway.bench.engines`: every engine against the raw loop on the same backlog:
  the scenarios and their plan, the work per message and the recorder (imported by
  process-engine workers, so kept free of heavy dependencies), the batch and results
  twins, the instrumented twins, the embedded log or Kafka and the raw consume loop, one
  run, the bare work's ceilings, correctness and latency, the ``io`` echo server.
* :mod:`~laneway.bench.reporting`: the rows and the ``--json`` document, the table and
  recommendations, the plots, ``laneway bench compare``.
* :mod:`~laneway.bench.members`: members of one group as processes, and process-engine
  workers (the ``members`` scenario).
* :mod:`~laneway.bench.share`: a share group against a classic group (``share``).
* :mod:`~laneway.bench.tickets`: the reservation workload ``load`` runs, and its traces (also
  used by ``examples/ticketing``).
* :mod:`~laneway.bench.load`: open-loop reservations on Kafka and PostgreSQL through
  ``laneway run`` topologies (``spike`` and ``paced``).
* :mod:`~laneway.bench.flow`: latency through the embedded log as a bus, and the memory
  bound of ``max_buffered_bytes`` (``laneway bench bus``, ``laneway bench byte-bound``).

Each folder imports only folders listed before it, never the command layer.
"""
