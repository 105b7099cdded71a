"""An attempt's output as the queue API keeps it: the first and the last OUTPUT_EDGE_CHARS
characters, joined by a line that says how many were cut. No I/O: a handler (or schedctl work,
for its command's stdout and stderr) feeds it text and sends what it kept with the ack or nack.
"""

from __future__ import annotations

import re
import threading

OUTPUT_EDGE_CHARS = 4_096  # kept from the start and from the end (the server keeps the same)
_CUT_LINE = re.compile(r"\n\[\.\.\. [1-9][0-9,]{0,30} characters left out \.\.\.\]\n")


def cut_marker(cut: int) -> str:
    """The line that stands for the `cut` characters left out of the middle."""
    return f"\n[... {cut:,} characters left out ...]\n"  # the server's own line


def bound_output(text: str) -> str:
    """`text` as the server keeps it: whole up to twice OUTPUT_EDGE_CHARS, else its two ends
    (a text bounded so already stays as it is)."""
    edge = OUTPUT_EDGE_CHARS
    if len(text) <= 2 * edge or _CUT_LINE.fullmatch(text, edge, len(text) - edge):
        return text
    return text[:edge] + cut_marker(len(text) - 2 * edge) + text[-edge:]


class Output:
    """Text fed piece by piece (from several threads), holding no more than its two ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._head = ""
        self._tail: list[str] = []  # the pieces after the head; joined and cut now and then
        self._tail_chars = 0
        self._total = 0

    def add(self, text: str) -> None:
        edge = OUTPUT_EDGE_CHARS
        with self._lock:
            self._total += len(text)
            room = edge - len(self._head)
            if room > 0:
                self._head += text[:room]
                text = text[room:]
            if not text:
                return
            self._tail.append(text)
            self._tail_chars += len(text)
            if self._tail_chars > 4 * edge:  # cut seldom: each piece is copied about once
                self._tail = [self._end()]
                self._tail_chars = len(self._tail[0])

    def text(self) -> str | None:
        """What was fed, bounded as bound_output does; None when nothing was."""
        with self._lock:
            if not self._total:
                return None
            tail = self._end()
            cut = self._total - len(self._head) - len(tail)
            return self._head + (cut_marker(cut) if cut else "") + tail

    def _end(self) -> str:
        return "".join(self._tail)[-OUTPUT_EDGE_CHARS:]
