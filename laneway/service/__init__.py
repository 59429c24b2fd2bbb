"""``laneway run``: a handler as a deployable worker (settings, members, health, logs)."""
