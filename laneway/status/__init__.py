"""The status page: one consumer's state (``GET /status`` and ``/status.json`` on the health
port) and a whole group's (``laneway status --group``), for a browser, with nothing to
install: a self-contained page that reads the JSON again every second."""
