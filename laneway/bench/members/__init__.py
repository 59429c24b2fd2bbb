"""The ``members`` scenario: members of one group as processes, and the process engine's
workers, with the per-process counts their rows add up from."""
