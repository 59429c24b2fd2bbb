"""``laneway dlq``: list, show and replay the records of a dead-letter topic, on Kafka or a
durable embedded log. The headers read are those
:mod:`laneway.control.dead_letters.router` writes; nothing in them is trusted."""
