"""Fault-injection suite (issue 6): a three-node cluster of real `schedd serve` processes, a
recorded client workload, seeded faults (kill -9, SIGSTOP, CPU load, optional network-namespace
partitions) and a history checker. `python -m tests.chaos --help` runs a campaign.
"""
