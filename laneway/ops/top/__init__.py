"""``laneway top``: the command (:mod:`~laneway.ops.top.command`), what one frame shows
(:mod:`~laneway.ops.top.view`) and the live view drawn with rich
(:mod:`~laneway.ops.top.live`)."""
