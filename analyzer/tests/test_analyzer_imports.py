"""The analyser's modules import each other without a cycle (counting the imports made inside a
function, which load a module only when an output needs it), and a leak report loads neither the
views nor the exports' renderers."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "memdump_analyzer"


def _name(path: Path) -> str:
    """A module's name in the package: `cli`, `exports.pprof`; a subpackage's `__init__.py` is
    the subpackage (`exports`), the package's own is `__init__`."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _package_of(path: Path) -> list[str]:
    """The (sub)package a module's relative imports start from."""
    return list(path.parent.relative_to(PACKAGE).parts)


def _resolve(base: list[str], name: str) -> str:
    """What `from <base> import name` imports: the module `name` if it is one, else base's
    `__init__`."""
    if (PACKAGE.joinpath(*base, f"{name}.py")).exists() or (
            PACKAGE.joinpath(*base, name, "__init__.py")).exists():
        return ".".join((*base, name))
    return ".".join(base) or "__init__"


def _imports(path: Path) -> set[str]:
    """The package's modules that `path` imports, at module level or inside a function."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    package = _package_of(path)
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        base = package[: len(package) - (node.level - 1)]
        if node.module is None:  # `from . import name`: a module, or the package's own name
            for alias in node.names:
                found.add(_resolve(base, alias.name))
        else:
            parts = node.module.split(".")
            found.add(_resolve(base + parts[:-1], parts[-1]))
    return found


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_import_cycle() -> None:
    graph = {_name(path): _imports(path) for path in _modules()}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module in graph, f"{path[-1]} imports {module}, which is not a module"
        assert module not in path, "import cycle: " + " -> ".join((*path, module))
        if module in done:
            return
        for dep in sorted(graph[module]):
            visit(dep, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())
    assert {"cli", "exports", "exports.pprof", "__init__"} <= graph.keys()


def test_modules_stay_small() -> None:
    for path in _modules():
        assert len(path.read_text().splitlines()) < 600, path.relative_to(PACKAGE)


# What `memdump-analyze DUMP` (the text report) must not load: the views, the exports'
# renderers and the other outputs' modules (each imported by the function that makes its output).
NOT_FOR_THE_REPORT = {
    "buildid", "callsites", "diff", "exports.charts", "exports.collapsed",
    "exports.flame", "exports.html", "exports.htmldiff", "exports.mapsvg", "exports.massif",
    "exports.pprof", "exports.profile", "gensupp", "heappass", "leanpass", "nativepass",
    "growth", "heapmap", "sarif", "suppressions", "symcache", "tagphases", "views", "views.cli",
    "views.common", "views.hotspots", "views.lifetimes", "views.peak", "views.series",
    "views.sizes", "views.stream", "views.temporary", "views.timeline", "vgframes", "vgmodel",
}

_LOADED = """
import sys
from memdump_analyzer.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
loaded = sorted(m[len("memdump_analyzer."):] for m in sys.modules
                if m.startswith("memdump_analyzer."))
sys.stderr.write("loaded " + " ".join(loaded) + "\\n")
sys.exit(code)
"""


def _report_modules(*argv: str) -> tuple[str, set[str]]:
    """The report's text and the package's modules it loaded, in a new interpreter."""
    fixtures = Path(__file__).resolve().parent / "fixtures"
    proc = subprocess.run([sys.executable, "-P", "-c", _LOADED, *argv], cwd=fixtures,
                          env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)},
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("loaded "), proc.stderr
    return proc.stdout, set(last.split()[1:])


def test_the_leak_report_loads_only_its_modules() -> None:
    fixtures = Path(__file__).resolve().parent / "fixtures"
    text, loaded = _report_modules("example.memdump")
    assert text == (fixtures / "example.report.txt").read_text()
    assert loaded & NOT_FOR_THE_REPORT == set()
    assert {"report", "replay", "aggregation", "symbolize"} <= loaded
    # every module stays importable by the output that needs it: --suppressions loads theirs
    _, loaded = _report_modules("--suppressions", "/dev/null", "example.memdump")
    assert "suppressions" in loaded and "views" not in loaded


def test_a_report_with_every_symbol_starts_no_tool() -> None:
    """A dump whose frames all have symbols (GDB's, `fs` records) runs neither addr2line, nm nor
    c++filt: its report does not even import subprocess (3 ms of every start-up)."""
    fixtures = Path(__file__).resolve().parent / "fixtures"
    script = ("import sys\nfrom memdump_analyzer.cli import main\ncode = main(sys.argv[1:])\n"
              "sys.stdout.flush()\n"
              "sys.stderr.write(f'subprocess {\"subprocess\" in sys.modules}\\n')\n"
              "sys.exit(code)\n")
    proc = subprocess.run([sys.executable, "-P", "-S", "-c", script, "example.memdump"],
                          cwd=fixtures, env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)},
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[-1] == "subprocess False"
