"""librdkafka settings of ``laneway run``: redaction by librdkafka's own list, the
``LANEWAY_KAFKA_<PROPERTY>`` variables (and ``_FILE``), and names librdkafka does not know."""

from __future__ import annotations

from pathlib import Path

import pytest

from laneway.errors import ConfigError
from laneway.service.settings import Resolved, kafka_settings, resolve
from laneway.sources.kafka import properties as kafka_properties
from laneway.sources.kafka.properties import (
    PROPERTIES,
    SENSITIVE,
    is_property,
    is_secret,
    redacted,
)

SECRET = "s3cr3t-value-never-shown"

SHAPED_LIKE_SECRETS = (
    "https.ca.pem",
    "ssl.certificate.pem",
    "ssl.keystore.location",
    "sasl.kerberos.keytab",
)
"""Not flagged by librdkafka, but named like a secret: redacted too."""
NOT_SECRETS = (
    "client.id",
    "security.protocol",
    "sasl.mechanism",
    "ssl.ca.location",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.client.id",
    "session.timeout.ms",
)
UNKNOWN_SECRET_NAMES = ("sasl.oauthbearer.refresh.token", "x.credential", "my.jaas.thing")


def variable(name: str) -> str:
    return "LANEWAY_KAFKA_" + name.upper().replace(".", "_")


def print_config(settings: Resolved) -> str:
    return "\n".join(f"{name} {value} ({origin})" for name, value, origin in settings.describe())


def toml_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "laneway.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", sorted(SENSITIVE - {"ssl_key"}) + list(SHAPED_LIKE_SECRETS))
def test_each_sensitive_property_is_redacted_from_the_file_and_the_environment(
    name: str, tmp_path: Path
) -> None:
    config = toml_file(tmp_path, f'[kafka]\n"{name}" = "{SECRET}-file"\n')
    from_file = resolve({}, {}, config)
    assert from_file.kafka[name] == f"{SECRET}-file", "the client still gets the value"
    assert (f"kafka.{name}", "***", "file") in from_file.describe()
    from_env = resolve({}, {variable(name): SECRET}, config)
    assert (f"kafka.{name}", "***", "env") in from_env.describe()
    for settings in (from_file, from_env):
        assert SECRET not in print_config(settings)
        assert SECRET not in repr(settings)


def test_the_sensitive_list_is_librdkafkas() -> None:
    assert {
        "sasl.password",
        "sasl.username",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "sasl.oauthbearer.assertion.private.key.pem",
        "ssl.key.password",
        "ssl.key.pem",
        "ssl.keystore.password",
    } <= SENSITIVE
    assert all(is_secret(name) for name in SENSITIVE)


@pytest.mark.parametrize("name", NOT_SECRETS)
def test_other_properties_are_shown(name: str) -> None:
    assert not is_secret(name)
    settings = resolve({}, {variable(name): "visible-value"}, None)
    assert (f"kafka.{name}", "'visible-value'", "env") in settings.describe()


@pytest.mark.parametrize("name", UNKNOWN_SECRET_NAMES)
def test_a_name_librdkafka_does_not_list_is_a_secret_when_it_sounds_like_one(name: str) -> None:
    assert name not in PROPERTIES and is_secret(name)
    assert redacted({name: SECRET, "client.id": "c"}) == {name: "***", "client.id": "c"}


def test_every_listed_property_is_known_to_the_installed_librdkafka() -> None:
    unknown = [name for name in sorted(PROPERTIES) if not kafka_properties._librdkafka_knows(name)]
    assert unknown == []
    assert not kafka_properties._librdkafka_knows("sesion.timeout.ms")


def test_a_property_newer_than_the_list_is_asked_of_librdkafka(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kafka_properties, "PROPERTIES", PROPERTIES - {"client.rack"})
    assert is_property("client.rack")
    assert not is_property("client.rck")


@pytest.mark.parametrize(
    ("suffix", "name"),
    [
        ("CLIENT_ID", "client.id"),
        ("SASL_PASSWORD", "sasl.password"),
        ("ENABLE_SSL_CERTIFICATE_VERIFICATION", "enable.ssl.certificate.verification"),
        ("SASL_OAUTHBEARER_CLIENT_ID", "sasl.oauthbearer.client.id"),
        ("LOG_LEVEL", "log_level"),
        ("SASL_OAUTHBEARER_ASSERTION_FILE", "sasl.oauthbearer.assertion.file"),
    ],
)
def test_a_variable_sets_the_property_its_name_spells(suffix: str, name: str) -> None:
    settings = kafka_settings({f"LANEWAY_KAFKA_{suffix}": "v"}, None)
    assert settings.values == {name: "v"} and settings.origins == {name: "env"}


def test_a_variable_wins_over_the_file_and_each_shows_its_origin(tmp_path: Path) -> None:
    config = toml_file(tmp_path, '[kafka]\nclient.id = "from-file"\n"session.timeout.ms" = 6000\n')
    settings = resolve({}, {"LANEWAY_KAFKA_CLIENT_ID": "from-env"}, config)
    assert settings.kafka == {"client.id": "from-env", "session.timeout.ms": 6000}
    rows = settings.describe()
    assert ("kafka.client.id", "'from-env'", "env") in rows
    assert ("kafka.session.timeout.ms", "6000", "file") in rows


def test_a_file_variable_reads_the_value_and_drops_one_trailing_newline(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text(f"{SECRET}\n\n")
    env = {"LANEWAY_KAFKA_SASL_PASSWORD_FILE": str(secret)}
    settings = resolve({}, env, None)
    assert settings.kafka == {"sasl.password": f"{SECRET}\n"}
    assert ("kafka.sasl.password", "***", "env file") in settings.describe()
    crlf = tmp_path / "crlf"
    crlf.write_bytes(b"abc\r\n")
    assert kafka_settings({"LANEWAY_KAFKA_CLIENT_ID_FILE": str(crlf)}, None).values == {
        "client.id": "abc"
    }


def test_a_missing_file_names_the_variable_and_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError) as raised:
        resolve({}, {"LANEWAY_KAFKA_SASL_PASSWORD_FILE": str(missing)}, None)
    assert str(raised.value) == (
        f"LANEWAY_KAFKA_SASL_PASSWORD_FILE={missing}: cannot read the file: "
        "No such file or directory"
    )


def test_a_property_set_twice_by_variables_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "p").write_text("x")
    env = {
        "LANEWAY_KAFKA_SASL_PASSWORD": "a",
        "LANEWAY_KAFKA_SASL_PASSWORD_FILE": str(tmp_path / "p"),
    }
    with pytest.raises(ConfigError, match=r"both set sasl\.password; keep one of them"):
        resolve({}, env, None)


def test_an_unknown_variable_names_itself_and_the_closest_property() -> None:
    with pytest.raises(ConfigError) as raised:
        resolve({}, {"LANEWAY_KAFKA_SASL_PASWORD": "x"}, None)
    message = str(raised.value)
    assert message.startswith("unknown environment variable LANEWAY_KAFKA_SASL_PASWORD")
    assert "did you mean LANEWAY_KAFKA_SASL_PASSWORD (sasl.password)?" in message


def test_every_laneway_kafka_variable_is_a_property_so_scripts_keep_out_of_the_prefix() -> None:
    with pytest.raises(ConfigError, match="librdkafka has no property 'bootstrap'"):
        resolve({}, {"LANEWAY_KAFKA_BOOTSTRAP": "127.0.0.1:9092"}, None)


@pytest.mark.parametrize(
    ("env", "toml", "expected"),
    [
        ({"LANEWAY_KAFKA_BOOTSTRAP_SERVERS": "h:1"}, "", "set that instead"),
        ({}, '[kafka]\n"group.id" = "g"\n', "group.id is set by laneway from its own setting"),
    ],
)
def test_properties_laneway_sets_itself_point_to_its_setting(
    env: dict[str, str], toml: str, expected: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=expected):
        resolve({}, env, toml_file(tmp_path, toml))


def test_an_unknown_kafka_key_names_the_file_and_the_closest_property(tmp_path: Path) -> None:
    config = toml_file(tmp_path, "[kafka]\nsesion.timeout.ms = 6000\n")
    with pytest.raises(ConfigError) as raised:
        resolve({}, {}, config)
    assert str(raised.value) == (
        f"--config {config}: [kafka] 'sesion.timeout.ms' is not a librdkafka property; "
        "did you mean 'session.timeout.ms'?"
    )


def test_a_kafka_value_must_be_a_scalar(tmp_path: Path) -> None:
    config = toml_file(tmp_path, '[kafka]\n"debug" = ["broker", "topic"]\n')
    with pytest.raises(ConfigError, match="'debug' is a list; expected a string, number"):
        resolve({}, {}, config)


def test_the_secrets_to_scrub_include_the_values_inside_a_sasl_config(tmp_path: Path) -> None:
    config = toml_file(
        tmp_path,
        '[kafka]\n"sasl.oauthbearer.config" = "principal=svc scope=read key=k3y-value"\n'
        '"sasl.password" = "pw"\n"client.id" = "not-a-secret"\n'
        '"sasl.username" = "tickets"\n"ssl.key.location" = "/etc/kafka/client.key"\n',
    )
    secrets = resolve({}, {}, config).client.secrets()
    assert secrets[0] == "principal=svc scope=read key=k3y-value", "longest first"
    assert "scope=read key=k3y-value" in secrets and "key=k3y-value" in secrets
    assert "read" not in secrets and "pw" not in secrets, "short texts: left alone"
    assert "not-a-secret" not in secrets
    assert "tickets" not in secrets and "/etc/kafka/client.key" not in secrets, "names, paths"
