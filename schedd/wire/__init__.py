"""The HTTP contract's structs: the answers the API encodes and the bodies it decodes, with
their constraints, so that tools/gen_openapi.py publishes them as they are. Below the store,
the api and the CLI (which may decode answers into them); imports no part that serves them."""
