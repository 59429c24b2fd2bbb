"""The service's own settings: addresses of the probes and /metrics, typed TOML values."""

from __future__ import annotations

from pathlib import Path

import pytest

from laneway.errors import ConfigError
from laneway.service.settings import OWN_VARIABLES, resolve
from laneway.sources.share.preview_warning import PREVIEW_WARNED
from laneway.state.settings import store_of


def toml_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "laneway.toml"
    path.write_text(text)
    return path


def test_probes_and_metrics_listen_on_loopback_unless_told() -> None:
    settings = resolve({}, {}, None)
    assert settings["health_address"] == settings["metrics_address"] == "127.0.0.1"
    assert settings["health_show_keys"] is False


def test_addresses_come_from_flag_environment_and_file(tmp_path: Path) -> None:
    config = toml_file(tmp_path, 'health_address = "::"\nmetrics_address = "localhost"\n')
    settings = resolve({}, {"LANEWAY_HEALTH_ADDRESS": "0.0.0.0"}, config)
    assert (settings["health_address"], settings.origins["health_address"]) == ("0.0.0.0", "env")
    assert (settings["metrics_address"], settings.origins["metrics_address"]) == (
        "localhost",
        "file",
    )
    assert resolve({"health_address": "[::1]"}, {}, None)["health_address"] == "::1"


@pytest.mark.parametrize("address", ["0.0.0.0:8080", "not an address", "-bad.example", "*", "a..b"])
def test_a_bad_address_names_the_option(address: str) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve({"metrics_address": address}, {}, None)
    assert str(raised.value).startswith(f"metrics_address={address!r} is not valid; expected an IP")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('concurrency = "64"', "concurrency = '64' is a string; expected a whole number"),
        ('commit_interval = "2"', "commit_interval = '2' is a string; expected a number of"),
        ('share = "true"', "share = 'true' is a string; expected true or false"),
    ],
)
def test_a_number_or_boolean_written_as_a_toml_string_is_an_error(
    line: str, expected: str, tmp_path: Path
) -> None:
    config = toml_file(tmp_path, line + "\n")
    with pytest.raises(ConfigError) as raised:
        resolve({}, {}, config)
    assert str(raised.value).startswith(f"--config {config}: {expected}")
    assert "without quotes" in str(raised.value)


def test_the_same_text_from_the_environment_is_fine_and_none_still_means_no_value(
    tmp_path: Path,
) -> None:
    assert resolve({}, {"LANEWAY_CONCURRENCY": "64"}, None)["concurrency"] == 64
    config = toml_file(tmp_path, 'health_port = "none"\nconcurrency = 64\n')
    settings = resolve({}, {}, config)
    assert settings["health_port"] is None and settings["concurrency"] == 64


def test_the_share_preview_variable_is_never_taken_for_a_misspelt_setting() -> None:
    assert PREVIEW_WARNED in OWN_VARIABLES
    assert resolve({}, {PREVIEW_WARNED: "1"}, None)["share"] is False


def test_the_checkouts_script_variables_need_no_entry_and_a_misspelt_setting_still_fails() -> None:
    scripts = {
        "LANEWAY_BROKER": "127.0.0.1:9092",
        "LANEWAY_BROKER_START_TIMEOUT": "90",
        "LANEWAY_POSTGRES_DSN": "postgresql://127.0.0.1:5432/laneway",
        "LANEWAY_TEST_RECORD_DIR": "/tmp/records",
        "LANEWAY_DEMO_WORK_MS": "0.2",
    }
    assert not set(scripts) & OWN_VARIABLES
    settings = resolve({}, scripts, None)
    assert settings.kafka == {} and settings["bootstrap_servers"] is None
    with pytest.raises(ConfigError, match="did you mean LANEWAY_CONNECT_TIMEOUT"):
        resolve({}, {"LANEWAY_CONECT_TIMEOUT": "5"}, None)


def test_the_state_store_comes_from_flag_environment_and_file(tmp_path: Path) -> None:
    config = toml_file(tmp_path, 'state_changelog = "ledger.balances"\n')
    settings = resolve({}, {"LANEWAY_STATE_DIR": str(tmp_path / "state")}, config)
    assert (settings.origins["state_dir"], settings.origins["state_changelog"]) == ("env", "file")
    store = store_of(settings.values)
    assert store is not None
    assert (store.path, store.changelog) == (tmp_path / "state", "ledger.balances")
    member = store_of(settings.values, 2)
    assert member is not None and member.path == tmp_path / "state" / "member-2"
    assert store_of(resolve({}, {}, None).values) is None


@pytest.mark.parametrize(
    ("given", "missing"), [("state_dir", "state_changelog"), ("state_changelog", "state_dir")]
)
def test_half_a_state_store_names_what_is_missing(given: str, missing: str) -> None:
    settings = resolve({given: "ledger.balances"}, {}, None)
    with pytest.raises(ConfigError, match=f"{given} needs {missing}"):
        store_of(settings.values)
