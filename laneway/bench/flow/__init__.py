"""How messages flow rather than how fast they are handled: the embedded log as an
in-process bus (``laneway bench bus``) and the memory bound of ``max_buffered_bytes`` on
Kafka (``laneway bench byte-bound``)."""
