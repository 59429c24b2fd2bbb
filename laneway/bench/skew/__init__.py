"""The ``skew`` scenario: hot keys contained (:mod:`.hot_keys`), tenants served in turn
(:mod:`.tenants`), one table (:mod:`.scenario`)."""
