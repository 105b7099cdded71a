"""schedd.worker's attempt output (bounded as the server keeps it), how a handler's end becomes
its settlement (Ack, Nack with output and is_dead), and the settle bodies that carry them."""

from __future__ import annotations

import json
import threading

import pytest

from schedd.worker import Ack, Nack, Output, Refused
from schedd.worker.output import OUTPUT_EDGE_CHARS, bound_output
from schedd.worker.protocol import ERROR_CHARS, is_older_node, settle_body
from schedd.worker.settlement import Settlement

EDGE = OUTPUT_EDGE_CHARS


def test_a_long_output_keeps_its_two_ends_and_says_how_much_was_left_out() -> None:
    text = "A" * EDGE + "x" * 10_000 + "Z" * EDGE
    kept = bound_output(text)
    assert kept == "A" * EDGE + "\n[... 10,000 characters left out ...]\n" + "Z" * EDGE


@pytest.mark.parametrize("piece", [1, 7, 100, 5_000, 40_000])
def test_output_fed_in_pieces_is_bounded_as_the_whole_would_be(piece: int) -> None:
    text = "".join(f"line {n}: {'é' * (n % 5)}\n" for n in range(3_000))
    for size in (0, 5, 2 * EDGE, len(text)):
        whole = text[:size]
        output = Output()
        for start in range(0, len(whole), piece):
            output.add(whole[start : start + piece])
        assert output.text() == (bound_output(whole) if whole else None)


def test_output_from_several_threads_counts_every_character() -> None:
    output = Output()
    lines = [f"{n:05d}\n" for n in range(4_000)]

    def feed(part: list[str]) -> None:
        for line in part:
            output.add(line)

    threads = [threading.Thread(target=feed, args=(lines[k::4],)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    text = output.text()
    assert text is not None
    cut = len(lines) * 6 - 2 * EDGE
    assert f"\n[... {cut:,} characters left out ...]\n" in text
    assert len(text) == 2 * EDGE + len(f"\n[... {cut:,} characters left out ...]\n")


def test_a_return_acks_and_ack_keeps_its_bounded_output() -> None:
    assert Settlement.of_return(None) == Settlement()
    assert Settlement.of_return("anything") == Settlement()
    assert Settlement.of_return(Ack()) == Settlement()
    assert Settlement.of_return(Ack("")) == Settlement()
    long = "y" * (3 * EDGE)
    assert Settlement.of_return(Ack(long)) == Settlement(output=bound_output(long))
    assert Settlement.of_return(Ack("done\n")).action == "ack"


def test_an_exception_nacks_and_nack_carries_output_and_dead() -> None:
    plain = Settlement.of_exception(KeyError("team"))
    assert plain == Settlement(error="KeyError: 'team'")
    assert plain.action == "nack"
    nack = Settlement.of_exception(Nack("exit code 3", output="partial\n"))
    assert nack == Settlement(error="exit code 3", output="partial\n", is_dead=False)
    dead = Settlement.of_exception(Nack("job runs as 'x': no such user on h", is_dead=True))
    assert dead == Settlement(error="job runs as 'x': no such user on h", is_dead=True)


def test_settle_bodies_name_outputs_and_dead_only_when_given() -> None:
    assert json.loads(settle_body(["r1"], None)) == {"receipts": ["r1"]}
    assert json.loads(settle_body(["r1"], "boom")) == {"receipts": ["r1"], "error": "boom"}
    ack = json.loads(settle_body(["r1"], None, outputs={"r1": "hi\n"}, is_dead=True))
    assert ack == {"receipts": ["r1"], "outputs": {"r1": "hi\n"}}  # an ack is never dead
    nack = json.loads(settle_body(["r1"], "e" * 5_000, outputs={"r1": "z" * 9_000}, is_dead=True))
    assert nack["dead"] is True and len(nack["error"]) == ERROR_CHARS
    assert nack["outputs"]["r1"] == bound_output("z" * 9_000)


@pytest.mark.parametrize(
    ("status", "detail", "is_older"),
    [
        (400, "outputs: is not a known field", True),
        (400, "dead: is not a known field", True),
        (400, "receipts: must be a list of 1-1000 receipt strings", False),
        (400, "outputs: must be an object of at most 1,000 receipts to output strings", False),
        (404, "outputs: is not a known field", False),
    ],
)
def test_an_older_node_is_told_by_its_refusal_of_the_new_fields(
    status: int, detail: str, is_older: bool
) -> None:
    refused = Refused("refused", status=status, code="invalid_request", detail=detail)
    assert is_older_node(refused) is is_older


def test_the_server_keeps_an_output_the_worker_bounded_as_it_is() -> None:
    """A worker keeps only the two ends of a long output: the server must not cut its marker
    line (and so its count) out again."""
    output = Output()
    output.add("h" * EDGE + "m" * 123_456 + "t" * EDGE)
    sent = output.text()
    assert sent is not None and "123,456 characters left out" in sent
    assert bound_output(sent) == sent  # the server's own function (wire.queues.bounded_output)
    assert bound_output(sent + "!") != sent + "!"  # not the marker's place: cut
    forged = "h" * EDGE + "\n[... 5 characters left out ...]\nextra" + "t" * EDGE
    assert bound_output(forged) != forged  # its middle is not the line
