"""Kafka-compatible murmur2 partitioning of the embedded log.

The expected values were produced by the Java client itself: a small program compiled against
kafka-clients-4.1.1.jar printed, for each key, ``Utils.murmur2(key)`` and
``Utils.toPositive(Utils.murmur2(key)) % n`` for n = 8, 7 and 100::

    javac -cp kafka-clients-4.1.1.jar Vectors.java
    java -cp kafka-clients-4.1.1.jar:slf4j-api-1.7.36.jar:. Vectors

Keys are given as hex of the exact bytes (texts are their UTF-8 encoding).
"""

from __future__ import annotations

import pytest

from laneway.sources.embedded.log import EmbeddedLog
from laneway.sources.embedded.partitioner import murmur2, murmur2_unsigned, partition_for_key

# (key as hex, Utils.murmur2, partition of 8, of 7, of 100)
JAVA_VECTORS = [
    ("", 275646681, 1, 2, 81),
    ("61", -1563381124, 4, 5, 24),
    ("6162", 316155434, 2, 0, 34),
    ("616263", 479470107, 3, 4, 7),
    ("61626364", -1323649548, 4, 5, 0),
    ("6162636465", 461995741, 5, 4, 41),
    ("616263646566", 1870650108, 4, 5, 8),
    ("61626364656667", -346467175, 1, 4, 73),
    ("6162636465666768", -955427363, 5, 0, 85),
    ("616363742d31", 294059390, 6, 2, 90),
    ("616363742d32", 2084802707, 3, 1, 7),
    ("6b65792d30", 29210041, 1, 0, 41),
    ("6b65792d3939", -876232990, 2, 6, 58),
    ("68656c6c6f20776f726c64", 1221641059, 3, 2, 59),
    ("6b61666b61", -798503068, 4, 3, 80),
    ("6c616e65776179", -35247067, 5, 0, 81),
    (
        "54686520717569636b2062726f776e20666f78206a756d7073206f76657220746865206c617a7920646f67",
        495243318,
        6,
        3,
        18,
    ),
    ("c3a974c3a92de697a5e69cac", 1580312863, 7, 3, 63),
    ("ff", -311467685, 3, 5, 63),
    ("80ff00", 2014942385, 1, 1, 85),
    ("00000000", 850957120, 0, 6, 20),
    ("fffffffffe", 688588846, 6, 1, 46),
]

# Longer keys, built the same way in Java and here (they exercise the word loop past 64 words).
LONG_VECTORS = [
    (bytes((i * 37 + 11) & 0xFF for i in range(103)), 65914331, 3, 0, 31),
    (bytes(300), -963845063, 1, 3, 85),
    (bytes((i * 7 + 3) & 0xFF for i in range(1001)), -731083524, 4, 6, 24),
]

ALL_VECTORS = [(bytes.fromhex(h), j, p8, p7, p100) for h, j, p8, p7, p100 in JAVA_VECTORS]
ALL_VECTORS += LONG_VECTORS


@pytest.mark.parametrize(("key", "java_hash", "p8", "p7", "p100"), ALL_VECTORS)
def test_murmur2_matches_the_java_client(
    key: bytes, java_hash: int, p8: int, p7: int, p100: int
) -> None:
    assert murmur2(key) == java_hash
    assert murmur2_unsigned(key) == java_hash & 0xFFFFFFFF
    assert (partition_for_key(key, 8), partition_for_key(key, 7)) == (p8, p7)
    assert partition_for_key(key, 100) == p100


def test_repeated_lookups_give_the_same_partition() -> None:
    keys = [b"repeat-%d" % i for i in range(50)] + [bytes(200)]
    first = [partition_for_key(key, 13) for key in keys]
    again = [partition_for_key(key, 13) for key in keys]
    assert first == again
    assert first == [(murmur2(key) & 0x7FFFFFFF) % 13 for key in keys]


def test_embedded_log_routes_keys_like_the_java_client() -> None:
    with EmbeddedLog() as log:
        log.create_topic("eight", partitions=8)
        log.create_topic("seven", partitions=7)
        for key, _, p8, p7, _ in ALL_VECTORS:
            assert log.produce("eight", b"x", key=key)[0] == p8
            assert log.produce("seven", b"x", key=key)[0] == p7
