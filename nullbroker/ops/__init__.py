"""What the operator sees: metrics, the console report and summary, the HTTP endpoint
and the Schema Registry it serves."""
