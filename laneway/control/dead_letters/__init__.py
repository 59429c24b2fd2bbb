"""The failure path after a message's last attempt: the dead-letter router, its log lines
and the per-key circuit."""
