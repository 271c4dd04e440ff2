#!/usr/bin/env python3
"""Keep ubsan_demos/README.md's table in step with ubsan_demos/expected.toml.

--write rewrites the table from the file, --check fails when it differs (the tests check the same),
--observe BUILD_DIR runs every demo build and prints a new expected.toml (behaviour texts kept).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ubsanlib  # noqa: E402


def _version(compiler: str) -> str:
    out = subprocess.run([compiler, "-dumpversion"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _toml_list(values: list[str]) -> str:
    if not values:
        return "[]"
    return "[\n" + "".join(f"    {_toml_str(v)},\n" for v in values) + "]"


def observe(build_dir: Path) -> str:
    """expected.toml as the builds in build_dir behave now."""
    old = ubsanlib.load_expected()
    lines = [
        "# What each ubsan_demos build did: written by",
        "# `scripts/ubsan-table.py --observe BUILD_DIR`, reviewed by hand. Reports are",
        "# `marker:column: message` (marker: `// UB: name` in the demo's source), addresses",
        "# 0xADDR. tests/ubsan checks every entry against the builds.",
        f"gcc_version = {_toml_str(_version('gcc'))}",
        f"clang_version = {_toml_str(_version('clang'))}",
    ]
    for demo in ubsanlib.demos(old):
        entry = old[demo]
        lines += ["", f"[{demo}]", f"behaviour = {_toml_str(entry['behaviour'])}"]  # type: ignore[index]
        for level in ubsanlib.PLAIN:
            got = ubsanlib.run(ubsanlib.binary(build_dir, demo, level))
            lines += [f"{level}.status = {_toml_str(got.status)}",
                      f"{level}.stdout = {_toml_list(got.stdout)}"]
        for compiler in ubsanlib.COMPILERS:
            got = ubsanlib.run(ubsanlib.binary(build_dir, demo, f"{compiler}-ubsan"))
            lines += [f"{compiler}.status = {_toml_str(got.status)}",
                      f"{compiler}.reports = {_toml_list(got.reports)}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the table in the README")
    mode.add_argument("--check", action="store_true", help="exit 1 if the README's table is stale")
    mode.add_argument("--observe", metavar="BUILD_DIR", type=Path,
                      help="run the builds in BUILD_DIR and print a new expected.toml")
    args = parser.parse_args(argv)
    if args.observe:
        sys.stdout.write(observe(args.observe))
        return 0
    readme = ubsanlib.README.read_text(encoding="utf-8")
    wanted = ubsanlib.readme_with_table(readme, ubsanlib.render_table(ubsanlib.load_expected()))
    if args.write:
        ubsanlib.README.write_text(wanted, encoding="utf-8")
        return 0
    if wanted != readme:
        print(f"{ubsanlib.README} is stale: run scripts/ubsan-table.py --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
