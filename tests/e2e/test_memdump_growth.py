"""memdump-analyze --growth on a recording, in both recorders: vector_growth's three vectors
grown one push_back at a time and its buffer doubled by realloc, found with exact figures."""

from __future__ import annotations

import json
from pathlib import Path

from memdump_e2e import analyze_raw, marker, record


def test_the_growth_chains_of_vector_growth(dump: Path) -> None:
    record("vector_growth", dump=dump)
    res = analyze_raw(dump, "--growth", "--format", "json")
    assert res.returncode == 0, res.stderr
    sites = json.loads(res.stdout)["sites"]
    three, grown = marker("vector_growth.cpp", "three", "GROW"), marker(
        "vector_growth.cpp", "realloc", "GROW")
    found = [(s["containers"], s["regrowths"], s["copied_bytes"], s["final_bytes"],
              s["reserve_bytes"], [(f["file"].rsplit("/", 1)[-1], f["line"])
                                   for f in s["stack"] if f["file"]
                                   and f["file"].endswith("vector_growth.cpp")])
             for s in sites]
    assert found == [
        (3, 21, 1524, {"min": 512, "max": 512}, {"min": 512, "max": 512},
         [(three.file, marker("vector_growth.cpp", "push", "GROW").line),
          (three.file, three.line)]),
        (1, 5, 496, {"min": 512, "max": 512}, {"min": 512, "max": 512},
         [(grown.file, grown.line)]),
    ]
