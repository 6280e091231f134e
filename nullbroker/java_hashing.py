"""Java's string hash and the order a java.util.HashMap (or HashSet) of strings, or of topic
partitions, iterates in: where Kafka answers with such an order (a group's partition of
__consumer_offsets, the SASL mechanisms a listener offers, SCRAM extensions in a signed
message, WriteTxnMarkers' results), nullbroker answers with the same one."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

Key = TypeVar("Key", bound=Hashable)

DEFAULT_CAPACITY = 16
LOAD_FACTOR = 0.75


def java_int(value: int) -> int:
    """The low 32 bits of `value` as Java's signed int holds them."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def java_string_hash(text: str) -> int:
    """Java's String.hashCode(), over UTF-16 code units, as a signed 32-bit int."""
    value = 0
    encoded = text.encode("utf-16-be")
    for index in range(0, len(encoded), 2):
        value = (31 * value + int.from_bytes(encoded[index : index + 2], "big")) & 0xFFFFFFFF
    return java_int(value)


def java_hash_order(keys: Iterable[str], capacity: int = DEFAULT_CAPACITY) -> list[str]:
    """`keys` (distinct, in insertion order) in the order a HashMap of them iterates: by
    bucket, `(h ^ h >>> 16) & (table size - 1)` of each key's hash, then by insertion within
    a bucket (a resize splits a bucket keeping that order). The table starts at `capacity`
    (a power of two: 16, HashMap's default; a HashSet made from a collection of n starts at
    max(n / 0.75 + 1, 16) rounded up) and doubles whenever the keys outgrow 0.75 of it."""
    ordered = list(dict.fromkeys(keys))
    size = capacity
    while len(ordered) > size * LOAD_FACTOR:
        size *= 2
    return _in_table_order(ordered, size)


def java_compute_if_absent_order(keys: Iterable[str], capacity: int) -> list[str]:
    """`keys` in the order a `new HashMap<>(capacity)` filled by computeIfAbsent iterates
    them: computeIfAbsent grows the table before an insert, once the map holds more than
    0.75 of it, where put grows it after; so `new HashMap<>(2)` holding two keys keeps its
    table of two."""
    ordered = list(dict.fromkeys(keys))
    size = table_size_for(capacity)
    for held in range(len(ordered)):
        if held > int(size * LOAD_FACTOR):
            size *= 2
    return _in_table_order(ordered, size)


def _in_table_order(
    ordered: list[Key], size: int, hash_code: Callable[[Key], int] | None = None
) -> list[Key]:
    """Distinct keys, in insertion order, as a table of `size` buckets iterates them."""
    hashing: Callable[[Key], int] = hash_code or java_string_hash  # type: ignore[assignment]

    def bucket(key: Key) -> int:
        hashed = hashing(key) & 0xFFFFFFFF
        return (hashed ^ (hashed >> 16)) & (size - 1)

    return sorted(ordered, key=bucket)  # sorted() is stable: insertion order within a bucket


def topic_partition_hash(key: tuple[str, int]) -> int:
    """Kafka's TopicPartition.hashCode(): 31 * (31 + partition) + the topic's hash."""
    topic, partition = key
    return (31 * (31 + partition) + java_string_hash(topic)) & 0xFFFFFFFF


def java_topic_partition_order(keys: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    """(topic, partition) keys, in insertion order, as a HashMap (or a ConcurrentHashMap,
    whose buckets are the same) of TopicPartitions of default capacity iterates them."""
    ordered = list(dict.fromkeys(keys))
    size = DEFAULT_CAPACITY
    while len(ordered) > size * LOAD_FACTOR:
        size *= 2
    return _in_table_order(ordered, size, topic_partition_hash)


def table_size_for(capacity: int) -> int:
    """The table size of `new HashMap<>(capacity)`: the least power of two at or above it
    (1 for 0)."""
    size = 1
    while size < capacity:
        size *= 2
    return size


def hash_set_capacity(count: int) -> int:
    """The table size of `new HashSet<>(collection)` of `count` elements."""
    return table_size_for(max(int(count / LOAD_FACTOR) + 1, DEFAULT_CAPACITY))
