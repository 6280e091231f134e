"""The most partitions one request may create, which CreateTopics and CreatePartitions
both count against (Kafka's controller's limit)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from ..common import Refusal

if TYPE_CHECKING:
    pass


# Kafka's controller refuses more new partitions than this in one request.
MAX_PARTITIONS_PER_REQUEST = 10_000


def check_partition_budget(new_partitions: int) -> None:
    if new_partitions > MAX_PARTITIONS_PER_REQUEST:
        raise Refusal(
            ErrorCode.policy_violation,
            f"excessively large number of partitions per request: {new_partitions} "
            f"(at most {MAX_PARTITIONS_PER_REQUEST})",
        )
