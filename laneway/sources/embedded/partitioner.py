"""Kafka's default key partitioner: murmur2 of the key bytes, made positive, modulo the count.

The Java client maps a keyed record to ``toPositive(Utils.murmur2(key)) % numPartitions``
(``toPositive`` clears the sign bit); librdkafka's ``murmur2_random`` partitioner is the
same function. Using it in the embedded log means a key lands on the same partition number
as it would in a Kafka topic with the same partition count.
"""

from __future__ import annotations

import struct

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_MEMO: dict[bytes, int] = {}
_MEMO_ENTRIES = 16_384
_MEMO_KEY_BYTES = 64
_TABLE_WORDS = 64
_UNPACKERS = [struct.Struct(f"<{count}I").unpack_from for count in range(_TABLE_WORDS)]


def murmur2_unsigned(data: bytes) -> int:
    """MurmurHash2 exactly as Kafka's ``Utils.murmur2``, as an unsigned 32-bit value."""
    length = len(data)
    h = _SEED ^ length
    full = length >> 2
    if full:
        if full < _TABLE_WORDS:
            words = _UNPACKERS[full](data)
        else:
            words = struct.unpack_from(f"<{full}I", data)
        for k in words:
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ (((k ^ (k >> 24)) * _M) & _MASK)
    rest = length & 3
    if rest:
        tail = full << 2
        if rest == 3:
            h ^= data[tail + 2] << 16
        if rest >= 2:
            h ^= data[tail + 1] << 8
        h = ((h ^ data[tail]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2(data)``: the same bits as a signed 32-bit Java ``int``."""
    h = murmur2_unsigned(data)
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key`` among ``partitions``.

    Hashes of short keys are memoized in a small bounded table (cleared when full), since
    real workloads repeat keys and the pure-Python hash costs about a microsecond.
    """
    positive = _MEMO.get(key)
    if positive is None:
        positive = murmur2_unsigned(key) & 0x7FFFFFFF
        if len(key) <= _MEMO_KEY_BYTES:
            if len(_MEMO) >= _MEMO_ENTRIES:
                _MEMO.clear()
            _MEMO[key] = positive
    return positive % partitions
