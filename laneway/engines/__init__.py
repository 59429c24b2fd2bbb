"""Execution engines: sync, thread, async and process."""
