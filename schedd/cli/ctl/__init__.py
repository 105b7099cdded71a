"""`schedctl`: the command-line client. It talks HTTP only (and previews schedules offline)."""
