"""Fairness under skew: a hot key's backlog contained, tenants served in turn, urgent work
first. See :mod:`~laneway.control.skew.counts`, :mod:`~laneway.control.skew.containment`
and :mod:`~laneway.control.skew.release`."""
