"""Dispatch: partition leases (leader side), heartbeats, and the dispatchers that claim due runs."""
