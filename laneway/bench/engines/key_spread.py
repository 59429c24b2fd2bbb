"""How a benchmark's keys spread over its messages: evenly, or Zipf-skewed like real traffic.

``uniform`` gives message ``i`` the key ``i mod keys``: every key carries the same share,
which flatters key ordering, since no key ever holds back the others. Real keys (users,
accounts, devices) are skewed: a few carry most of the traffic. ``zipf`` draws each
message's key from a Zipf distribution over ``keys`` ranks (key ``r`` with probability
proportional to ``1 / (r + 1) ** ZIPF_EXPONENT``); with 100 keys the hottest carries about
19% of the messages and the ten hottest about 56%. Under key ordering the hottest key's
messages run one after another, so a run is bound by that key's share times the work per
message: the figure a uniform run hides.

The draw is seeded, so every engine of a run (and every repetition) consumes the same
backlog.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Sequence

UNIFORM = "uniform"
ZIPF = "zipf"
SPREADS = (UNIFORM, ZIPF)

ZIPF_EXPONENT = 1.0
"""The skew ``s``: 1 is the classic Zipf law of word and web-object popularity."""
SEED = 20_250_611
"""Fixed, so every engine and repetition reads the same keys."""


def key_indexes(messages: int, keys: int, spread: str = UNIFORM) -> Sequence[int]:
    """The key index (``0 .. keys - 1``) of every message, in sequence order."""
    if spread == UNIFORM:
        return range(messages) if keys >= messages else [i % keys for i in range(messages)]
    if spread != ZIPF:
        raise ValueError(f"key spread {spread!r}: choose from {', '.join(SPREADS)}")
    weights = [1.0 / (rank + 1) ** ZIPF_EXPONENT for rank in range(keys)]
    cumulative = list(itertools.accumulate(weights))
    chooser = random.Random(SEED)
    return chooser.choices(range(keys), cum_weights=cumulative, k=messages)


def lane_sizes(messages: int, keys: int, spread: str = UNIFORM) -> list[int]:
    """Messages per key that has any, largest first: the lanes key ordering runs."""
    counts = Counter(key_indexes(messages, keys, spread))
    return sorted(counts.values(), reverse=True)
