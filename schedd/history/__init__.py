"""Closed history segments between nodes: what a node offers its peers (a manifest of name,
size and sha256), and how a new or wiped node fetches what it lacks from them, resumable and
verified twice (the file's sha256, then the rows' content digest the log agreed on).

Segment files themselves (their rows, opening, closing, digest) are store/segments.py's; this
package only moves closed, immutable files and never writes the store."""
