"""Stateful handlers: per-key state kept in a compacted changelog topic (see the guide).

:class:`~laneway.state.store.StateStore` says where, :class:`~laneway.state.state.State`
is what a handler gets; the rest is how a consumer keeps it (:mod:`laneway.state.keeper`).
"""
