"""The transaction coordinator's APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
TxnOffsetCommit, and what `kafka-transactions` reads, DescribeTransactions,
ListTransactions and DescribeProducers (InitProducerId with a transactional id is
log/init_producer_id.py's). The state they change is nullbroker.state.transactions'.

One module per Kafka API, each declaring its KEY beside its `handle`, imported by its key's
first request (nullbroker.handlers.IMPORTED_ON_FIRST_USE): this package imports none of
them, so that one does not bring the others."""
