"""Command-line entry points: `schedd` (the daemon) and `schedctl` (an HTTP client)."""
