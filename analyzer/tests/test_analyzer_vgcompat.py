"""--format valgrind and valgrind-xml (vgcompat.py, docs/valgrind-compat.md): valgrind memcheck's
text output and XML from a leak report, and what memdump's valgrind options ask of them."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, run_cli
from memdump_analyzer.vgcompat import expand_path
from memdump_analyzer.vgframes import GroupStacks, short_name

MIXED = str(FIXTURES / "mixed.memdump")
FULL = ("--leak-check=full", "--show-leak-kinds=all")


def test_text_is_valgrinds_layout() -> None:
    """mixed.valgrind.txt: a double free, a definite leak through strdup and a reachable block,
    the runtime's stdio buffer counted as freed (valgrind's freeres)."""
    result = run_cli("--format", "valgrind", *FULL, "--command", "/src/app", "--command", "a b",
                     MIXED)
    assert result.returncode == 0
    assert result.stdout == (FIXTURES / "mixed.valgrind.txt").read_text()
    assert "==777== Command: /src/app a b\n" in result.stdout
    assert "==777==   total heap usage: 4 allocs, 3 frees, 1,078 bytes allocated\n" in result.stdout


@pytest.mark.parametrize(("options", "errors"), [
    ((), "1 errors from 1 contexts"),  # --leak-check=summary: the double free, no loss record
    (("--leak-check=full",), "2 errors from 2 contexts"),
    (("--leak-check=yes", "--errors-for-leak-kinds=reachable"), "2 errors from 2 contexts"),
    (("--leak-check=full", "--errors-for-leak-kinds=all"), "3 errors from 3 contexts"),
    (("--leak-check=full", "--errors-for-leak-kinds=none"), "1 errors from 1 contexts"),
])
def test_error_summary(options: tuple[str, ...], errors: str) -> None:
    """The ERROR SUMMARY counts every heap error and, with --leak-check=full, each loss record of
    --errors-for-leak-kinds; --fail-on-leak exits with 1 when it counts any."""
    result = run_cli("--format", "valgrind", "--fail-on-leak", *options, MIXED)
    assert f"==777== ERROR SUMMARY: {errors} (suppressed: 0 from 0)\n" in result.stdout
    assert result.returncode == 1
    assert run_cli("--format", "valgrind", *options, MIXED).returncode == 0


def test_summary_and_quiet() -> None:
    summary = run_cli("--format", "valgrind", MIXED).stdout
    assert "loss record" not in summary
    assert "==777== Rerun with --leak-check=full to see details of leaked memory\n" in summary
    quiet = run_cli("--format", "valgrind", "-q", "--leak-check=full", MIXED).stdout
    assert quiet.splitlines()[0] == "==777== Invalid free() / delete / delete[] / realloc()"
    assert "SUMMARY" not in quiet and "Memcheck" not in quiet
    assert quiet.endswith("==777== 6 bytes in 1 blocks are definitely lost in loss record 1 of 2\n"
                          "==777==    at 0x7FFFF7E60A1E: malloc (in /usr/libexec/valgrind/"
                          "vgpreload_memcheck-amd64-linux.so)\n"
                          "==777==    by 0x7FFFF7E60A1E: strdup (in "
                          "/lib/x86_64-linux-gnu/libc.so.6)\n"
                          "==777==    by 0x555555555400: copy_name(char const*) (util.cc:5)\n"
                          "==777==    by 0x555555555220: main (app.cc:22)\n==777== \n")


def test_xml_protocol_4(tmp_path: Path) -> None:
    out = tmp_path / "x.%p.xml"
    result = run_cli("--format", "valgrind-xml", *FULL, "--command", "/src/app", "--command", "<&>",
                     "--tool-arg=--xml=yes", "-o", str(out), MIXED)
    assert result.returncode == 0, result.stderr
    root = ET.parse(tmp_path / "x.777.xml").getroot()
    assert [root.findtext(t) for t in ("protocolversion", "protocoltool", "pid", "tool")] == \
        ["4", "memcheck", "777", "memcheck"]
    assert [a.text for a in root.find("args/argv")] == ["/src/app", "<&>"]
    assert [a.text for a in root.find("args/vargv")] == ["memdump", "--xml=yes"]
    assert [s.findtext("state") for s in root.iter("status")] == ["RUNNING", "FINISHED"]
    errors = root.findall("error")
    assert [e.findtext("kind") for e in errors] == ["InvalidFree", "Leak_DefinitelyLost",
                                                    "Leak_StillReachable"]
    assert [e.findtext("unique") for e in errors] == ["0x0", "0x1", "0x2"]
    leak = errors[1]
    assert (leak.findtext("xwhat/leakedbytes"), leak.findtext("xwhat/leakedblocks")) == ("6", "1")
    assert leak.findtext("xwhat/text") == \
        "6 bytes in 1 blocks are definitely lost in loss record 1 of 2"
    assert [(f.findtext("fn"), f.findtext("dir"), f.findtext("file"), f.findtext("line"))
            for f in leak.iter("frame")] == [
        ("malloc", None, None, None), ("strdup", None, None, None),
        ("copy_name(char const*)", "/src", "util.cc", "5"), ("main", "/src", "app.cc", "22")]
    assert [(p.findtext("count"), p.findtext("unique")) for p in root.iter("pair")] == \
        [("1", "0x0")]


def test_file_names_expand_as_valgrinds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOB", "7")
    assert expand_path("log.%p.%q{JOB}.100%%", 42) == "log.42.7.100%"
    monkeypatch.delenv("JOB")
    with pytest.raises(ValueError, match="environment variable JOB is not set"):
        expand_path("log.%q{JOB}", 42)
    with pytest.raises(ValueError, match="'%x' is not %p"):
        expand_path("log.%x", 42)
    result = run_cli("--format", "valgrind", "-o", "x.%y", MIXED)
    assert result.returncode == 2
    assert result.stderr.strip().endswith("'%y' is not %p, %q{VAR} nor %%")


@pytest.mark.parametrize(("name", "short"), [
    ("std::vector<int, std::allocator<int> >::reserve(unsigned long)", "reserve"),
    ("std::allocator_traits<std::allocator<int> >::allocate(std::allocator<int>&, unsigned long)",
     "allocate"),
    ("open_session", "open_session"),
    ("ns::Widget::size() const", "size"),
    ("ns::max<std::pair<int, int> >(int (*)(int), long)", "max<std::pair<int, int> >"),
])
def test_inlined_functions_are_named_by_their_dwarf_name(name: str, short: str) -> None:
    assert short_name(name) == short


def test_the_dump_is_read_again_only_for_unread_call_sites(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operations recorded at the stacks (a second reading of the dump) are looked up only
    for the loss records whose call site could not be read, never without loss records."""
    from memdump_analyzer import analyze, rescan
    from memdump_analyzer.suppressions import call_site

    analysis = analyze(MIXED)
    asked: list[set[int]] = []
    monkeypatch.setattr(rescan, "alloc_ops", lambda path, nodes: asked.append(nodes) or {})
    GroupStacks(analysis, [], 12)
    assert asked == []
    GroupStacks(analysis, analysis.leaks, 12)
    app = {g.node for g in analysis.leaks
           if (g.raw or g.stack)[call_site(g.raw or g.stack)].module == "/src/app"}
    assert app  # /src/app is not on this machine: its call sites cannot be read
    assert len(asked) == 1 and app <= asked[0] <= {g.node for g in analysis.leaks}
