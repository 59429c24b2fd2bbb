"""Offsets and progress: what may run, what is finished, what to commit, and the commit
metadata that remembers finished offsets beyond the commit point."""
