"""``laneway bench``: the benchmark suite that shows which engine fits which workload.

Modules: :mod:`~laneway.bench.scenarios` (what is measured), :mod:`~laneway.bench.workloads`
and :mod:`~laneway.bench.recorder` (the handlers, also imported by process-engine workers, so
kept free of heavy dependencies), :mod:`~laneway.bench.targets` and :mod:`~laneway.bench.raw`
(the embedded log or Kafka, and the raw consume loop), :mod:`~laneway.bench.harness` (one
run), :mod:`~laneway.bench.analysis` (correctness and latency), :mod:`~laneway.bench.results`
(rows and the JSON schema), :mod:`~laneway.bench.report`, :mod:`~laneway.bench.plots`,
:mod:`~laneway.bench.compare`, :mod:`~laneway.bench.runner` and the click commands in
:mod:`~laneway.bench.command`.
"""
