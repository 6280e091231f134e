"""Client quotas (KIP-546): DescribeClientQuotas and AlterClientQuotas, kept and checked as
Kafka's controller does (nullbroker.state.client_quotas), never enforced: nullbroker throttles
no client. What `kafka-configs --entity-type users|clients|ips` sets and reads.

One module per Kafka API, each declaring its KEY beside its `handle`, imported by its key's
first request (nullbroker.handlers.IMPORTED_ON_FIRST_USE): this package imports none of
them."""
