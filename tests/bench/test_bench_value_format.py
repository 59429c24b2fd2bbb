"""``laneway bench --value-format json|avro``: the backlog carries order records that every
engine (the raw loop included) decodes, so the rows show what decoding costs; order, loss
and duplicates are still checked, from the decoded records' sequence numbers."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from laneway.bench.engines.orders import BenchOrder
from laneway.bench.engines.value_formats import deserializer, value_encoder
from laneway.bench.engines.workloads import sequence_of
from laneway.cli import main


@pytest.mark.parametrize("value_format", ["json", "avro"])
def test_every_engine_decodes_the_records_and_stays_correct(
    value_format: str, tmp_path: Path
) -> None:
    json_path = tmp_path / "run.json"
    result = CliRunner().invoke(
        main,
        ["bench", "--scenarios", "trivial", "--engines", "raw,baseline,thread,async,process",
         "--messages", "400", "--keys", "10", "--partitions", "2", "--no-ceilings",
         "--value-format", value_format, "--json", str(json_path)],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"{value_format} values decoded" in " ".join(result.stdout.split())
    document = json.loads(json_path.read_text())
    assert document["settings"]["value_format"] == value_format
    rows = document["rows"]
    assert {row["engine"] for row in rows} == {"raw", "baseline", "thread", "async", "process"}
    for row in rows:
        assert (row["status"], row["lost"], row["duplicates"]) == ("OK", 0, 0), row
        assert row["ordering_check"] == "PASS", row


def test_records_are_about_200_bytes_and_decode_to_their_sequence() -> None:
    encode = value_encoder("json")
    assert 180 <= len(encode(123)) <= 220
    decoded = deserializer("json")(encode(123))  # type: ignore[misc]
    assert isinstance(decoded, BenchOrder)
    assert sequence_of(decoded) == 123
    assert msgspec.json.decode(encode(5))["sequence"] == 5
    avro = deserializer("avro")
    assert avro is not None
    assert sequence_of(avro(value_encoder("avro")(77))) == 77
    assert sequence_of(b"0000000042") == 42
