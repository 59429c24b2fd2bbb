"""The engine scenarios: every engine and the raw consume loop on the same backlog (the
scenarios and their plan, the work per message, the recorder, the batch, results and
instrumented twins, the logs run against, one run, the bare work's ceilings, correctness
and latency, the ``io`` scenario's echo server)."""
