"""The codecs of laneway.serde: what each decodes and encodes, how they fail, how they are
named as option text, that they pickle for process workers, and that nothing heavy is
imported before a codec is made."""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any, TypedDict

import msgspec
import pytest
from typed_app import ORDER_AVRO, Order, OrderProto, Payment

from laneway import serde
from laneway.errors import ConfigError
from laneway.serde.codec import require
from laneway.serde.names import deserializer, serializer


class Tagged(TypedDict):
    id: int
    tags: list[str]


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        (Order, Order(1, 2.5, "n")),
        (Payment, Payment(2, 3.0)),
        (Tagged, {"id": 3, "tags": ["a"]}),
        (Any, {"free": [1, "form"]}),
    ],
)
def test_json_decodes_into_the_type_and_encodes_it_back(kind: Any, value: Any) -> None:
    codec = serde.json(kind)
    data = codec.encode(value, "orders")
    assert codec(data) == value
    assert type(codec(data)) is type(value)


def test_json_validates_while_it_decodes() -> None:
    codec = serde.json(Order)
    with pytest.raises(msgspec.ValidationError, match=r"Expected `int`, got `str` - at `\$.id`"):
        codec(b'{"id": "7", "amount": 1}')
    assert serde.json(Order, strict=False)(b'{"id": "7", "amount": 1}') == Order(7, 1.0)
    with pytest.raises(msgspec.DecodeError, match="malformed"):
        codec(b"{not json")


def test_text_decodes_utf8_and_refuses_what_is_not() -> None:
    codec = serde.text()
    assert codec("é".encode()) == "é"
    assert codec.encode("é", "t") == "é".encode()
    with pytest.raises(UnicodeDecodeError):
        codec(b"\xff")
    assert serde.text("latin-1")(b"\xe9") == "é"
    with pytest.raises(ConfigError, match="codec name"):
        serde.text("no-such-encoding")


def test_avro_schemaless_round_trip_into_dicts_and_types() -> None:
    codec = serde.avro(ORDER_AVRO)
    data = codec.encode({"id": 1, "amount": 2.0, "note": "x"}, "t")
    assert codec(data) == {"id": 1, "amount": 2.0, "note": "x"}
    typed = serde.avro(json.dumps(ORDER_AVRO), type=Order)
    assert typed(data) == Order(1, 2.0, "x")
    assert typed.encode(Order(1, 2.0, "x"), "t") == data
    with pytest.raises(ConfigError, match="not a valid Avro schema"):
        serde.avro({"type": "no-such-type"})


def test_protobuf_parses_the_message_class() -> None:
    codec = serde.protobuf(OrderProto)
    data = codec.encode(OrderProto(id=5, amount=1.5), "t")
    assert codec(data) == OrderProto(id=5, amount=1.5)
    with pytest.raises(ConfigError, match="generated protobuf message class"):
        serde.protobuf(Order)


def test_wire_format_codecs_need_a_schema_id_to_encode() -> None:
    for codec in (serde.json(wire_format=True), serde.avro(ORDER_AVRO, wire_format=True)):
        assert "schema_id" in (codec.cannot_encode() or "")
        with pytest.raises(ConfigError, match="no schema_id to write"):
            serializer(codec, "value_serializer")


def test_codecs_pickle_as_their_arguments() -> None:
    for codec in (
        serde.json(Order),
        serde.json(),
        serde.text(),
        serde.avro(ORDER_AVRO, type=Order, schema_id=3),
        serde.json(Payment, strict=False, wire_format=True),
    ):
        again = pickle.loads(pickle.dumps(codec))
        assert repr(again) == repr(codec)
        assert type(again) is type(codec)
    data = serde.json(Order).encode(Order(1, 1.0), "t")
    assert pickle.loads(pickle.dumps(serde.json(Order)))(data) == Order(1, 1.0)


def test_a_codecs_repr_names_it() -> None:
    assert repr(serde.json(Order)) == "serde.json(typed_app.Order)"
    assert repr(serde.json()) == "serde.json()"
    assert repr(serde.json(Order, strict=False)) == "serde.json(typed_app.Order, strict=False)"
    assert repr(serde.text()) == "serde.text()"


def test_option_text_names_a_codec() -> None:
    assert deserializer("bytes", "value_deserializer") is None
    assert deserializer(None, "value_deserializer") is None
    assert isinstance(deserializer("str", "value_deserializer"), serde.TextCodec)
    assert deserializer("json", "value_deserializer")(b"[1]") == [1]  # type: ignore[misc]
    json_order = deserializer("json:typed_app:Order", "value_deserializer")
    assert repr(json_order) == "serde.json(typed_app.Order)"
    avro_order = deserializer("avro:typed_app:ORDER_AVRO", "value_deserializer")
    assert isinstance(avro_order, serde.AvroCodec)
    proto = deserializer("protobuf:typed_app:OrderProto", "value_deserializer")
    assert isinstance(proto, serde.ProtobufCodec)
    assert deserializer("typed_app:calls", "value_deserializer") is not None


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("yaml", "expected 'bytes', 'str', 'json', FORMAT:MODULE:ATTR"),
        ("json:no_such_module_here:Order", "cannot import module 'no_such_module_here'"),
        ("json:typed_app:Nope", "module 'typed_app' has no attribute 'Nope'"),
        ("typed_app:RECORD_DIR", "not callable"),
    ],
)
def test_option_text_that_names_nothing_is_a_clear_error(text: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error) as raised:
        deserializer(text, "value_deserializer")
    assert "value_deserializer" in str(raised.value)


def test_a_value_that_is_no_codec_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="value_serializer=42 is not valid"):
        serializer(42, "value_serializer")


def test_a_missing_extra_is_named() -> None:
    with pytest.raises(
        ConfigError,
        match=r"serde.json needs the no_such_package package .* "
        r"pip install 'laneway\[json\]'",
    ):
        require("no_such_package.json", "json", "serde.json")


def test_a_missing_package_fails_when_the_codec_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "msgspec", None)  # "import msgspec" raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'laneway\[json\]'"):
        serde.json(Order)
    monkeypatch.setitem(sys.modules, "fastavro", None)
    with pytest.raises(ConfigError, match=r"pip install 'laneway\[avro\]'"):
        serde.avro(ORDER_AVRO)


IMPORTS = """
import sys
import laneway
from laneway import serde
import laneway.config
heavy = ("msgspec", "fastavro", "google.protobuf", "confluent_kafka.schema_registry")
print(sorted(m for m in heavy if m in sys.modules))
serde.json()
print(sorted(m for m in heavy if m in sys.modules))
"""


def test_serde_imports_a_format_only_when_a_codec_of_it_is_made() -> None:
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split("\n")[:2] == ["[]", "['msgspec']"], done.stdout + done.stderr


@dataclasses.dataclass
class _Local:
    id: int


def test_process_engines_refuse_a_deserializer_that_cannot_pickle() -> None:
    from laneway.config import ConsumerConfig

    with pytest.raises(
        ConfigError, match=r"value_deserializer=.* is not valid with engine='process'"
    ):
        ConsumerConfig(engine="process", value_deserializer=lambda data: data)  # type: ignore[arg-type]
    ConsumerConfig(engine="process", value_deserializer=serde.json(Order))  # type: ignore[arg-type]
    ConsumerConfig(engine="thread", value_deserializer=lambda data: data)  # type: ignore[arg-type]


def test_format_text_naming_a_ready_codec_uses_it_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: avro:MODULE:CODEC made serde.avro(CODEC), which failed with "'AvroCodec'
    # object is not iterable" (laneway run: exit 2).
    (tmp_path / "ready_codecs.py").write_text(
        "from laneway import serde\nfrom typed_app import ORDER_AVRO\n"
        "ORDERS = serde.avro(ORDER_AVRO)\nTEXT = serde.text()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import ready_codecs  # type: ignore[import-not-found]

    assert deserializer("avro:ready_codecs:ORDERS", "value_deserializer") is ready_codecs.ORDERS
    with pytest.raises(ConfigError, match="names a avro codec") as raised:
        deserializer("protobuf:ready_codecs:ORDERS", "value_deserializer")
    assert "give ready_codecs:ORDERS without 'protobuf:'" in str(raised.value)
    assert deserializer("ready_codecs:TEXT", "value_deserializer") is ready_codecs.TEXT
