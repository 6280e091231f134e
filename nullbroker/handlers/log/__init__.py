"""The partitions' logs: Produce and InitProducerId (the write side, into the null sink),
Fetch (synthetic records), ListOffsets, OffsetForLeaderEpoch and DeleteRecords (where each
log starts and ends). One module per Kafka API, each declaring its KEY beside its `handle`
(nullbroker.handlers); asked_partitions.py is what three of them share.

The produce_lane beside this package (nullbroker.handlers.produce_lane) answers the common
Produce request whole in C, before any of these."""
