"""schedd: a distributed job scheduler (one-time, delayed and cron jobs; Raft-replicated)."""

__version__ = "0.1.0"
