"""Schema Registry codecs: wire-format records whose schema ids resolve through
confluent-kafka's registry client.

``registry = serde.registry(url)`` (the registry's address; or ``config={...}`` with
``basic.auth.user.info`` and the other settings of
``confluent_kafka.schema_registry.SchemaRegistryClient``, or ``client=`` an existing
client) makes codecs for records in the wire format (see :mod:`laneway.serde.wire`):

* ``registry.avro(schema=None, type=None)``: each record's writer schema is fetched by
  its id once (the client and this codec cache it) and the record decoded with it,
  resolved to ``schema`` when given (Avro schema evolution), into ``type`` when given;
  encoding registers ``schema`` under the subject ``<topic>-value`` (``-key``) through
  confluent-kafka's ``AvroSerializer``.
* ``registry.protobuf(MessageClass)``: records are parsed with the class (the header's
  message indexes must be the class's); encoding registers the class's ``.proto`` (and its
  imports) through confluent-kafka's ``ProtobufSerializer``.
* ``registry.json(type, schema=None)``: records are decoded by msgspec into ``type``;
  encoding registers ``schema`` (a JSON Schema text) once per subject.

``subject=`` names the subject instead of ``<topic>-value``. Needs
``pip install 'laneway[registry]'`` plus the format's extra (``avro``, ``protobuf``,
``json``). A URL of the form ``mock://name`` gives confluent-kafka's in-memory registry
(``MockSchemaRegistryClient``), for tests.
"""

from __future__ import annotations

import io
import json as stdlib_json
import threading
from collections.abc import Mapping
from typing import Any, TypeVar

from laneway.errors import ConfigError
from laneway.serde.avro_codec import Schema, parse, to_builtins, to_type
from laneway.serde.codec import Codec, require
from laneway.serde.protobuf_codec import ProtobufCodec
from laneway.serde.wire import WireFormatError, frame, unframe

T = TypeVar("T")
M = TypeVar("M")

_MODULE = "confluent_kafka.schema_registry"


class SchemaRegistry:
    """A Schema Registry to make codecs with (see the module docs).

    Its ``repr`` shows the URL only: the other settings may hold credentials. Built from a
    ``url`` (and ``config``) it pickles, so process-engine workers make their own client;
    built from a ``client`` object it serves only the sync, thread and async engines.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        config: Mapping[str, Any] | None = None,
        client: Any = None,
    ) -> None:
        given = dict(config or {})
        if url is not None:
            given["url"] = url
        if (client is None) == (not given.get("url")):
            raise ConfigError(
                "serde.registry() needs a url (or config={'url': ...}), or a client; "
                "not both, not neither"
            )
        require(_MODULE, "registry", "serde.registry")
        self._config = given
        self._client = client
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        """The registry client (made on first use from the URL and config)."""
        with self._lock:
            if self._client is None:
                registry = require(_MODULE, "registry", "serde.registry")
                self._client = registry.SchemaRegistryClient.new_client(self._config)
            return self._client

    def avro(
        self, schema: Schema | None = None, *, type: Any = None, subject: str | None = None
    ) -> RegistryAvro[Any]:
        """A codec of Avro wire-format records (see the module docs)."""
        return RegistryAvro(self, schema, type=type, subject=subject)

    def protobuf(
        self, message_class: type[M], *, subject: str | None = None
    ) -> RegistryProtobuf[M]:
        """A codec of Protobuf wire-format records of ``message_class``."""
        return RegistryProtobuf(self, message_class, subject=subject)

    def json(
        self, type: Any = Any, *, schema: str | None = None, subject: str | None = None
    ) -> RegistryJson[Any]:
        """A codec of JSON wire-format records decoded into ``type``."""
        return RegistryJson(self, type, schema=schema, subject=subject)

    def subject_for(self, topic: str, key: bool, subject: str | None) -> str:
        """The subject a schema is registered under: ``subject``, else TopicNameStrategy's
        ``<topic>-value`` (``<topic>-key``)."""
        return subject or f"{topic}-{'key' if key else 'value'}"

    def __reduce__(self) -> tuple[Any, ...]:
        if self._config.get("url") is None:
            raise TypeError(
                "a serde.registry(client=...) cannot be sent to process-engine workers; "
                "make it with serde.registry(url, config=...) so each worker connects itself"
            )
        return _registry, (self._config,)

    def __repr__(self) -> str:
        url = self._config.get("url")
        return f"serde.registry({url!r})" if url else "serde.registry(client=...)"


def _registry(config: dict[str, Any]) -> SchemaRegistry:
    return SchemaRegistry(config=config)


class _RegistryCodec(Codec[T]):
    """What the registry's codecs share: the registry, a subject, the ``repr``."""

    def __init__(self, registry: SchemaRegistry, *args: object, **kwargs: object) -> None:
        super().__init__(registry, *args, **{k: v for k, v in kwargs.items() if v is not None})
        self.registry = registry
        self._subject: str | None = kwargs.get("subject")  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = super().__repr__().replace(f"serde.{self.name}({self.registry!r}, ", "(")
        inner = inner.replace(f"serde.{self.name}({self.registry!r})", "()")
        return f"{self.registry!r}.{self.name}{inner}"

    def _context(self, topic: str, key: bool) -> Any:
        serialization = require("confluent_kafka.serialization", "registry", "serde.registry")
        field = serialization.MessageField.KEY if key else serialization.MessageField.VALUE
        return serialization.SerializationContext(topic, field)

    def _strategy_conf(self) -> dict[str, Any]:
        subject = self._subject
        if subject is None:
            return {}
        return {"subject.name.strategy": lambda ctx, record_name: subject}


class RegistryAvro(_RegistryCodec[T]):
    """Avro wire-format records, each decoded with its writer schema from the registry."""

    name = "avro"

    def __init__(
        self,
        registry: SchemaRegistry,
        schema: Schema | None = None,
        *,
        type: Any = None,
        subject: str | None = None,
    ) -> None:
        super().__init__(
            registry, *(() if schema is None else (schema,)), type=type, subject=subject
        )
        fastavro = require("fastavro", "avro", "serde.registry(...).avro")
        self._schema_text = None if schema is None else _text(schema)
        reader_schema = None if schema is None else parse(schema, "serde.registry(...).avro")
        self.type = type
        convert = to_type(type, "serde.registry(...).avro")
        reader = fastavro.schemaless_reader
        writers: dict[int, Any] = {}

        def decode(data: bytes) -> Any:
            schema_id, payload = unframe(data)
            writer = writers.get(schema_id)
            if writer is None:
                writer = writers[schema_id] = self._writer_schema(schema_id)
            record = reader(io.BytesIO(payload), writer, reader_schema)
            return record if convert is None else convert(record)

        self.decode = decode
        self._serializers: dict[bool, Any] = {}

    def _writer_schema(self, schema_id: int) -> Any:
        """The parsed writer schema of ``schema_id`` (with the schemas it references)."""
        client = self.registry.client
        schema = client.get_schema(schema_id)
        if not schema.references:
            return parse(schema.schema_str, f"schema id {schema_id}")
        resolve = require(f"{_MODULE}._sync.avro", "registry", "serde.registry")
        common = require(f"{_MODULE}.common.avro", "registry", "serde.registry")
        named = resolve._resolve_named_schema(schema, client)
        return common.parse_schema_with_repo(schema.schema_str, named)

    def encode(self, value: T, topic: str, key: bool = False) -> bytes:
        serializer = self._serializers.get(key)
        if serializer is None:
            avro = require(f"{_MODULE}.avro", "registry", "serde.registry(...).avro")
            builtins = to_builtins()
            serializer = self._serializers[key] = avro.AvroSerializer(
                self.registry.client,
                self._schema_text,
                to_dict=lambda value, ctx: builtins(value),
                conf=self._strategy_conf(),
            )
        data: bytes = serializer(value, self._context(topic, key))
        return data

    def cannot_encode(self) -> str | None:
        if self._schema_text is None:
            return f"{self!r} has no schema to register and write with"
        return None


class RegistryProtobuf(_RegistryCodec[M]):
    """Protobuf wire-format records of one message class."""

    name = "protobuf"

    def __init__(
        self, registry: SchemaRegistry, message_class: type[M], *, subject: str | None = None
    ) -> None:
        super().__init__(registry, message_class, subject=subject)
        self.decode = ProtobufCodec(message_class, wire_format=True).decode
        self.message_class = message_class
        self._serializers: dict[bool, Any] = {}

    def encode(self, value: M, topic: str, key: bool = False) -> bytes:
        serializer = self._serializers.get(key)
        if serializer is None:
            protobuf = require(f"{_MODULE}.protobuf", "protobuf", "serde.registry(...).protobuf")
            conf = {"use.deprecated.format": False, **self._strategy_conf()}
            serializer = self._serializers[key] = protobuf.ProtobufSerializer(
                self.message_class, self.registry.client, conf
            )
        data: bytes = serializer(value, self._context(topic, key))
        return data


class RegistryJson(_RegistryCodec[T]):
    """JSON wire-format records decoded by msgspec; values encoded under a registered
    JSON Schema."""

    name = "json"

    def __init__(
        self,
        registry: SchemaRegistry,
        type: Any = Any,
        *,
        schema: str | None = None,
        subject: str | None = None,
    ) -> None:
        super().__init__(
            registry, *(() if type is Any else (type,)), schema=schema, subject=subject
        )
        msgspec = require("msgspec", "json", "serde.registry(...).json")
        decode_json = msgspec.json.Decoder(type).decode
        self.type = type
        self.decode = lambda data: decode_json(unframe(data)[1])
        self._encoder = msgspec.json.Encoder()
        self._schema = schema
        self._ids: dict[str, int] = {}

    def encode(self, value: T, topic: str, key: bool = False) -> bytes:
        subject = self.registry.subject_for(topic, key, self._subject)
        schema_id = self._ids.get(subject)
        if schema_id is None:
            if self._schema is None:
                raise WireFormatError(f"{self!r} has no schema to register")
            registry = require(_MODULE, "registry", "serde.registry")
            schema = registry.Schema(self._schema, "JSON")
            schema_id = self._ids[subject] = self.registry.client.register_schema(subject, schema)
        return frame(schema_id, self._encoder.encode(value))

    def cannot_encode(self) -> str | None:
        if self._schema is None:
            return f"{self!r} has no schema to register"
        return None


def registry(
    url: str | None = None, *, config: Mapping[str, Any] | None = None, client: Any = None
) -> SchemaRegistry:
    """A Schema Registry to make codecs with (see :class:`SchemaRegistry`)."""
    return SchemaRegistry(url, config=config, client=client)


def _text(schema: Schema) -> str:
    return schema if isinstance(schema, str) else stdlib_json.dumps(dict(schema))
