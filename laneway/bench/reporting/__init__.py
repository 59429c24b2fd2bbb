"""What a benchmark shows: the rows and the ``--json`` document, the table and the
recommendations, the plots, and ``laneway bench compare``."""
