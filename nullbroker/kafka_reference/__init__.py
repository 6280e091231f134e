"""Apache Kafka's own answers, kept as data: tables generated from a real Kafka 4.1 by asking
it, so that nullbroker answers as Kafka does without a Kafka at hand. Nothing here is written
by hand, and nothing here imports the package: the rooms above read it.

- `broker_configs.py`: every broker config Kafka lists (its type, default and whether it may
  be altered), written by `tests/oracle/kafka_broker_configs.py` from Kafka's DescribeConfigs
  of a broker. `state/broker_configs.py` layers nullbroker's settings over it.
- `config_documentation.py`: Kafka's text for every topic and broker config, written by
  `scripts/kafka_config_docs.py` from Kafka's DescribeConfigs with include_documentation;
  the DescribeConfigs handler imports it when a client first asks for documentation.

Run the generator again (against a newer Kafka) to change a table; each file says so in its
`@generated` line, and .gitattributes marks them generated for review tools.
"""
