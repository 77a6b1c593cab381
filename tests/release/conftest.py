"""One release per test session: `python -m build` (sdist, then the wheel from the sdist) of
tablectl and of the example vendor package, installed together into one fresh venv outside
the repository. Building and installing take a while, so every release test shares them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Release:
    dist: Path  # tablectl's sdist and wheel
    example_wheel: Path
    build_log: str
    venv: Path
    home: Path  # a working directory outside the repository

    @property
    def sdist(self) -> Path:
        (path,) = self.dist.glob("tablectl-*.tar.gz")
        return path

    @property
    def wheel(self) -> Path:
        (path,) = self.dist.glob("tablectl-*.whl")
        return path

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """A command of the fresh venv (tablectl, python), run outside the repository."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return subprocess.run(
            [str(self.venv / "bin" / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.home,
            env=env,
        )


def _run(*args: str, cwd: Path | None = None, timeout: float = 600) -> str:
    done = subprocess.run(
        args, capture_output=True, text=True, cwd=cwd, timeout=timeout, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


@pytest.fixture(scope="session")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    base = tmp_path_factory.mktemp("release")
    dist = base / "dist"
    # from a copy, so the build leaves nothing in the checkout (egg-info, build/)
    source = base / "source"
    ignore = shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", "*.egg-info", "build", "dist", ".*cache", ".bench"
    )
    shutil.copytree(ROOT, source, ignore=ignore, symlinks=True)
    log = _run(sys.executable, "-m", "build", "--outdir", str(dist), str(source))
    example = base / "example"
    shutil.copytree(ROOT / "examples" / "vendor-shoe", example, ignore=ignore)
    example_dist = base / "example-dist"
    _run(sys.executable, "-m", "build", "--wheel", "--outdir", str(example_dist), str(example))
    (example_wheel,) = example_dist.glob("*.whl")
    venv = base / "venv"
    _run(sys.executable, "-m", "venv", str(venv))
    (wheel,) = dist.glob("tablectl-*.whl")
    _run(str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel),
         str(example_wheel))  # fmt: skip
    home = base / "home"
    home.mkdir()
    return Release(dist, example_wheel, log, venv, home)
