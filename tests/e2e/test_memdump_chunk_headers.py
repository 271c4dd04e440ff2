"""glibc's words that point at the chunk header after a lost block (its bins and top, the fd/bk
words left in recycled memory) do not make the block possibly lost: the pointer scan's kinds are
valgrind's on tests/programs/chunk_tails.c, whose lost entity of 56 bytes fills its 64-byte chunk,
and `memdump who-points-at` sets those words apart from the program's pointers.

Before the scan knew them, the game's lost entity was possibly lost in both recorders (28 such
words in stdout's buffer, carved from the freed entities, and 2 in main_arena's bins), and with a
lost note carved from the same chunks, indirectly lost under the note."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from memdump_e2e import analyze, marker, program, record
from test_memdump_reach import kind_sites
from test_memdump_vs_valgrind import _valgrind_kinds

SOURCE = "chunk_tails.c"
KINDS = ("definite", "indirect", "possible", "reachable")

# case -> {(marker, leak kind): (bytes, blocks)}, valgrind 3.19's figures (checked against it)
CASES = {
    "game": {("entity", "definite"): (56, 1)},
    "game-thread": {("entity", "definite"): (56, 1), ("log", "reachable"): (4096, 1)},
    "game-note": {("entity", "definite"): (56, 1), ("note", "definite"): (4096, 1)},
    "interior": {("entity", "possible"): (56, 1)},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_leak_kinds_are_valgrinds(case: str, dump: Path, tmp_path: Path) -> None:
    run = record("chunk_tails", case, dump=dump)
    report = analyze(dump)
    want = {(marker(SOURCE, name), kind): figures for (name, kind), figures in CASES[case].items()}
    assert kind_sites(report) == want, run.describe()
    kinds = report.summary["leak_kinds"]
    ours = {k: (kinds[k]["bytes"], kinds[k]["blocks"]) for k in KINDS}
    _, _, valgrinds, _ = _valgrind_kinds([str(program("chunk_tails")), case], tmp_path)
    assert ours == valgrinds, run.describe()


def _who_points_at(case: str, group: int, dump: Path) -> str:
    """`memdump who-points-at` on the 56-byte block of `memdump block-list GROUP`, once the
    program has printed its summary (stdout's buffer allocated)."""
    find = (f"python import re; b = gdb.execute('memdump block-list {group}', to_string=True); "
            "gdb.execute('memdump who-points-at ' + re.search(r'(0x[0-9a-f]+)\\[56\\]', b)[1] + "
            "' 56')")
    run = record("chunk_tails", case, dump=dump, before=[
        f"break {SOURCE}:{marker(SOURCE, 'summary-printed', 'BREAK').line}"],
        after=["memdump leaks", find])
    text = run.stdout
    assert "Searching for pointers pointing in 56 bytes from " in text, run.describe()
    return text[text.index("Searching for pointers"):]


def test_who_points_at_sets_glibcs_words_apart(dump: Path) -> None:
    """The lost entity (group 2, after the 200-byte board): no pointer of the program's; 30 words
    of glibc's at its next chunk's header, 48 bytes in: two in main_arena (a bin's fd and bk),
    28 in stdout's buffer at a 64-byte stride (the fd words malloc_consolidate left in the
    freed entities it merged)."""
    text = _who_points_at("game", 2, dump)
    head = re.match(r"Searching for pointers pointing in 56 bytes from (0x[0-9a-f]+)\n"
                    r"0 pointers found\n"
                    r"and 30 words of glibc's malloc, each the address of the chunk header "
                    r"after a live block \(its bins, its top, the fd/bk words left in recycled "
                    r"memory\), not pointers into it:\n", text)
    assert head is not None, text
    lost = int(head[1], 16)
    words = re.findall(rf"\*(0x[0-9a-f]+) points at the next chunk's header, 48 bytes inside "
                       rf"{lost:#x}\n  Address 0x[0-9a-f]+ is (.*)\n", text)
    assert len(words) == 30, text
    holders = [re.sub(r"[\d,]+ bytes inside (a block of size [\d,]+) at 0x[0-9a-f]+", r"\1", h)
               for _, h in words]
    assert holders.count("a block of size 4,096") == 28, text
    in_buffer = [int(a, 16) for a, h in zip((a for a, _ in words), holders, strict=True)
                 if h == "a block of size 4,096"]
    assert {b - a for a, b in zip(in_buffer, in_buffer[1:], strict=False)} == {64}, text


def test_who_points_at_lists_a_genuine_interior_pointer(dump: Path) -> None:
    """The program's pointer 40 bytes into the entity is the program's (possibly lost, as
    valgrind says), and glibc's words 48 bytes in are not mixed with it."""
    text = _who_points_at("interior", 1, dump)
    ours = text[: text.index(" found\n")]
    assert re.search(r"\n\*0x[0-9a-f]+ interior points at 40 bytes inside 0x[0-9a-f]+\n  Address "
                     r"0x[0-9a-f]+ is 0 bytes inside data symbol \"interior\"\n1 pointer$",
                     ours), text
