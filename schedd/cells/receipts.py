"""A receipt as a cell hands it out: `<cell>~<receipt>`, so another cell, whose batch ids and
tenants may be the same, never settles it (docs/scaling.md §4). Pure: marks and splits text."""

from __future__ import annotations

import re

SEPARATOR = "~"
_CELL = re.compile(r"[a-z0-9-]{1,32}")  # a cell's name (directory.py); never holds the separator


def marked(cell: str, receipt: str) -> str:
    """The receipt as cell `cell` hands it out."""
    return f"{cell}{SEPARATOR}{receipt}"


def split(receipt: str) -> tuple[str | None, str]:
    """(the cell that handed `receipt` out, the receipt as the store knows it); (None, receipt)
    for one no cell marked. A store's receipt never starts with a cell's name and the separator:
    its nonce holds no separator, and a batch's `.~` follows a `.`, which no cell name holds."""
    cell, found, rest = receipt.partition(SEPARATOR)
    if found and _CELL.fullmatch(cell):
        return cell, rest
    return None, receipt
