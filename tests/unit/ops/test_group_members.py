"""Where ``laneway status`` finds the members: addresses given, or every address a name
resolves to (a Kubernetes headless service), and what it drops from their answers."""

from __future__ import annotations

import pytest

from laneway.errors import ConfigError
from laneway.ops.group_status import Members, member_url, service_urls, without_keys


def test_a_member_address_is_completed_to_its_status_json() -> None:
    assert member_url("127.0.0.1:8080") == "http://127.0.0.1:8080/status.json"
    assert member_url("https://pod:8080/status") == "https://pod:8080/status.json"
    with pytest.raises(ConfigError, match="--member 'ftp://x'"):
        member_url("ftp://x")


def test_a_service_name_gives_every_address_it_resolves_to() -> None:
    urls = service_urls("localhost:8080")
    assert "http://127.0.0.1:8080/status.json" in urls
    assert all(url.endswith(":8080/status.json") for url in urls)
    assert service_urls("no-such-name.invalid:8080") == []
    members = Members(["http://127.0.0.1:8080/status.json"], ["localhost:8080"])
    assert members.resolve().count("http://127.0.0.1:8080/status.json") == 1
    with pytest.raises(ConfigError, match="--member-service 'localhost'"):
        service_urls("localhost")


def test_keys_a_member_shows_are_dropped() -> None:
    answer = {"partitions": [{"blocking_key": "acct-1", "offset": 3}],
              "lists": {"stalled": {"entries": [{"key": "acct-1", "offset": 3}]}}}  # fmt: skip
    assert "acct-1" not in repr(without_keys(answer))
    assert without_keys(answer)["lists"]["stalled"]["entries"] == [{"offset": 3}]
