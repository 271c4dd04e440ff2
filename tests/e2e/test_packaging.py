"""The analyser installs with pip as the `memdump-analyze` console script (offline)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pip_install_gives_the_console_script(tmp_path: Path) -> None:
    # Build from a copy: setuptools writes build/ and *.egg-info next to pyproject.toml.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "analyzer" / "memdump_analyzer", src / "analyzer" / "memdump_analyzer",
                    ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index",
         "--no-build-isolation", "--disable-pip-version-check", "-w", str(dist), str(src)],
        capture_output=True, text=True, timeout=300, check=False)
    assert build.returncode == 0, build.stderr
    wheels = list(dist.glob("dbgkit-*.whl"))
    assert len(wheels) == 1, wheels
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True, timeout=120)
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--disable-pip-version-check",
         str(wheels[0])],
        capture_output=True, text=True, timeout=300, check=False)
    assert install.returncode == 0, install.stderr
    script = venv / "bin" / "memdump-analyze"
    fixture = ROOT / "analyzer" / "tests" / "fixtures" / "example.memdump"
    run = subprocess.run([str(script), "--format", "json", "--fail-on-leak", str(fixture)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 1, run.stderr  # the example leaks 16 bytes
    assert '"bytes": 16' in run.stdout
    # the subpackages install too (the exports, docs/exports.md)
    folded = subprocess.run([str(script), "--format", "collapsed", str(fixture)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert (folded.returncode, folded.stdout) == (0, "main 96\nmain;new_node 16\n"), \
        folded.stderr
    view = subprocess.run([str(script), "peak", str(fixture)],  # the views' subpackage
                          capture_output=True, text=True, timeout=60, check=False)
    assert (view.returncode, view.stderr) == (0, "")
    assert "peak: 112 bytes in 3 blocks live after event 5\n" in view.stdout
    missing = subprocess.run([str(script), str(tmp_path / "none.memdump")],
                             capture_output=True, text=True, timeout=60, check=False)
    assert missing.returncode == 2
    assert missing.stderr == f"memdump-analyze: {tmp_path / 'none.memdump'}: no such file\n"
