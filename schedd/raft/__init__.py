"""pysyncobj wiring: the replicated object, command encoding, submit-and-wait, snapshots."""
