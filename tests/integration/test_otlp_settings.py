"""``laneway run`` with ``OTEL_EXPORTER_OTLP_ENDPOINT`` it cannot honour: one line naming
the variable (and the package to install), exit code 2, before anything starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(
    ("protocol", "expected"),
    [
        (
            "bogus",
            "laneway run: error: OTEL_EXPORTER_OTLP_PROTOCOL='bogus' is not valid; laneway run "
            "exports spans with http/protobuf or grpc",
        ),
        ("grpc", "pip install 'laneway[otlp]' opentelemetry-exporter-otlp-proto-grpc"),
    ],
)
def test_an_export_laneway_run_cannot_make_is_one_line_and_exit_2(
    tmp_path: Path, protocol: str, expected: str
) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    if protocol == "grpc":
        try:
            import opentelemetry.exporter.otlp.proto.grpc  # noqa: F401
        except ImportError:
            pass
        else:
            pytest.skip("the gRPC exporter is installed here")
    environment = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
    }
    command = [sys.executable, "-m", "laneway", "run", "any_module:handle",
               "--log-dir", str(tmp_path / "log"), "--group", "g", "--topic", "t"]  # fmt: skip
    done = subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert expected in done.stderr
    untraced = subprocess.run(
        [*command, "--tracing", "off"], env=environment, capture_output=True, text=True, timeout=60
    )
    assert "OTEL_EXPORTER_OTLP" not in untraced.stderr  # off: the variables are not read
