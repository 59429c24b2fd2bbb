"""The local files of a state store, one module per backend (see :mod:`.base`)."""
