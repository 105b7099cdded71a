"""SQLite schema, migrations, queries and the apply functions: the only writers of state."""
