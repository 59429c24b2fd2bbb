"""The process engine: a pool of worker processes for CPU-bound handlers (slots, batching,
placement of lanes, the worker loop and its replies)."""
