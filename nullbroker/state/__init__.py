"""What the broker knows, free of requests: topics and the null sink, retained
batches, producers, transactions, consumer groups, Kafka's config entries."""
