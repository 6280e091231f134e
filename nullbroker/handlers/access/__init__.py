"""Access control: DescribeAcls, CreateAcls and DeleteAcls, answered as a Kafka broker with no
authorizer configured answers them (every client may do everything): SECURITY_DISABLED, in
Kafka's words. An admin tool that lists or sets ACLs (kafka-acls, an Admin client's
describeAcls) is told so, as it would be by such a Kafka, rather than losing its connection.

One module per Kafka API, each declaring its KEY beside its `handle`, imported by its key's
first request (nullbroker.handlers.IMPORTED_ON_FIRST_USE): this package imports none of
them."""
