"""Writing records into a log: the Producer a source provides, and the stage that settles an
input message only once everything written for it is acknowledged."""
