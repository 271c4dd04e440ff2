"""scripts/setup.sh waits for another package manager's apt locks instead of failing at once."""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "setup.sh"
DPKG_LOCK = Path("/var/lib/dpkg/lock-frontend")


def fake_tools(bin_dir: Path, log: Path) -> None:
    """A dpkg-query saying gdb is missing (the rest installed), an apt-get logging its arguments."""
    bin_dir.mkdir()
    (bin_dir / "dpkg-query").write_text(
        '#!/bin/sh\n[ "$3" = gdb ] && exit 1\nprintf "install ok installed"\n')
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$*" >>"{log}"\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)


@pytest.mark.skipif(os.geteuid() != 0 or not DPKG_LOCK.exists(),
                    reason="holds dpkg's lock as another package manager would: root and dpkg")
def test_waits_for_the_dpkg_lock(tmp_path: Path) -> None:
    log = tmp_path / "apt-get.log"
    fake_tools(tmp_path / "bin", log)
    fd = os.open(DPKG_LOCK, os.O_RDWR)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pytest.skip("another package manager holds dpkg's lock right now")
        env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
        proc = subprocess.Popen([str(SCRIPT), "--demo"], stderr=subprocess.PIPE, text=True,
                                env=env)
        try:
            assert proc.stderr is not None
            lines = [proc.stderr.readline(), proc.stderr.readline()]
            comm = Path("/proc/self/comm").read_text().strip()
            assert lines == [
                "setup.sh: installing gdb\n",
                f"setup.sh: waiting for process {os.getpid()} ({comm}) to release {DPKG_LOCK} "
                "(another package manager is running; up to 600 s)\n"]
            # Nothing reaches apt-get while the lock is held.
            assert not log.exists()
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN)
        rest = proc.stderr.read()
        assert proc.wait(timeout=60) == 0, rest
    finally:
        os.close(fd)
    assert rest == ""  # said once
    assert log.read_text() == \
        "-o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends gdb\n"
