"""The HTTP API (aiohttp): routes, auth and error mapping. Writes go through Raft proposals."""
