"""Admission: the gate a message passes before its handler runs, and the limits it enforces
to protect what handlers call, a rate cap and an adaptive concurrency limit.

:mod:`~laneway.engines.admission.rate` (:class:`TokenBucket`, ``max_rate``),
:mod:`~laneway.engines.admission.adaptive` (:class:`AdaptiveLimit`,
``concurrency_limit="adaptive"``) and :mod:`~laneway.engines.admission.gate` (the
:class:`Gate` every engine's :class:`~laneway.engines.invoker.Invoker` passes each message
through). The logic of the first two is pure (the clock is passed in), so it is tested
without threads or sleeps.
"""
