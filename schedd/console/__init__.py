"""The web console at /ui/: static files shipped in the package (static/) and the aiohttp routes
that serve them with strict security headers. Its pages call the public HTTP API only; nothing
here reads the store or the node, and no route here needs a token (the data needs one)."""
