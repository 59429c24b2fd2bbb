"""The control plane: the consumer's control thread, and the named parts of its loop."""
