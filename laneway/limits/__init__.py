"""Limits that protect what handlers call: a rate cap and an adaptive concurrency limit.

:mod:`~laneway.limits.rate` (:class:`TokenBucket`, ``max_rate``),
:mod:`~laneway.limits.adaptive` (:class:`AdaptiveLimit`, ``concurrency_limit="adaptive"``)
and :mod:`~laneway.limits.gate` (the :class:`Gate` every engine's
:class:`~laneway.engines.invoker.Invoker` passes each message through). The logic of the
first two is pure (the clock is passed in), so it is tested without threads or sleeps.
"""
