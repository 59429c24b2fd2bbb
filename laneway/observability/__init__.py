"""Backends for laneway's metrics (Prometheus) and its tracing (OpenTelemetry); each needs
an extra: ``pip install 'laneway[metrics]'`` / ``'laneway[otel]'``."""
