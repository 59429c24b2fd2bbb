"""The ``share`` scenario: a Kafka share group against a classic consumer group, and the
share source against a bare ``ShareConsumer`` loop, with the member processes it starts."""
