"""Installing without a C++ compiler still works, on the pure-Python backend.

The wheel is built from a copy of the project with ``CC`` and ``CXX`` pointing
at ``/bin/false``, installed into a fresh virtual environment, and run there.
Everything stays offline: the build uses the running environment's
setuptools and Cython (``--no-build-isolation``), and the fresh environment
borrows the running one's dependencies through a ``.pth`` file instead of
downloading them.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

import streambpe

REPO = Path(streambpe.__file__).resolve().parent.parent

# Trains on a small text, encodes and decodes it; prints the backend and the ids.
SMOKE = """
import json, pathlib, sys, tempfile
import streambpe
corpus = pathlib.Path(tempfile.mkdtemp()) / "c.txt"
corpus.write_text("low lower lowest<|endoftext|>newer newest widest " * 50, encoding="utf-8")
vocab, merges = streambpe.train_bpe(corpus, 300, ["<|endoftext|>"], workers=1)
tok = streambpe.Tokenizer(vocab, merges, ["<|endoftext|>"])
ids = tok.encode("the lowest newest<|endoftext|>")
assert tok.decode(ids) == "the lowest newest<|endoftext|>"
print(json.dumps({"backend": streambpe.backend(), "file": streambpe.__file__, "ids": ids,
                  "merges": [[a.hex(), b.hex()] for a, b in merges]}))
"""


def _project_copy(destination: Path) -> Path:
    """The files a build needs, without build outputs of the working tree."""
    ignore = shutil.ignore_patterns("*.so", "*.cpp", "__pycache__", "*.egg-info", "build")
    destination.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, destination / name)
    shutil.copytree(REPO / "streambpe", destination / "streambpe", ignore=ignore)
    return destination


def _run_smoke(python: str | Path, env: dict[str, str], cwd: Path) -> dict[str, object]:
    result = subprocess.run(
        [str(python), "-c", SMOKE], env=env, cwd=cwd, capture_output=True, text=True, check=True
    )
    parsed: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return parsed


@pytest.mark.slow
def test_install_without_a_compiler_runs_on_the_pure_backend(tmp_path: Path) -> None:
    """Guards the optional build: no compiler means a warning and a working pure install."""
    pytest.importorskip("Cython", reason="the build needs Cython (in the test extra)")
    source = _project_copy(tmp_path / "src")
    wheels = tmp_path / "wheels"
    env = {**os.environ, "CC": "/bin/false", "CXX": "/bin/false"}
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", str(wheels), str(source)],
        env=env, capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert "the compiled core could not be built" in build.stdout + build.stderr
    (wheel,) = wheels.glob("streambpe-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert not [name for name in archive.namelist() if name.endswith(".so")]

    fresh = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(fresh)
    fresh_python = fresh / "bin" / "python"
    fresh_site = Path(
        subprocess.run(
            [str(fresh_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    # The dependencies come from the running environment, after the fresh site-packages.
    (fresh_site / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(fresh_python), "install", "--no-deps",
         "--no-index", str(wheel)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]

    clean_env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "STREAMBPE_PURE_PYTHON")
    }
    pure = _run_smoke(fresh_python, clean_env, tmp_path)
    assert pure["backend"] == "python"
    assert str(pure["file"]).startswith(str(fresh_site))
    here = _run_smoke(sys.executable, clean_env, tmp_path)
    assert (pure["ids"], pure["merges"]) == (here["ids"], here["merges"])


def test_environment_variable_forces_the_pure_backend(tmp_path: Path) -> None:
    """Guards ``STREAMBPE_PURE_PYTHON=1``: the pure backend runs, with the same results."""
    env = {k: v for k, v in os.environ.items() if k != "STREAMBPE_PURE_PYTHON"}
    forced = _run_smoke(sys.executable, {**env, "STREAMBPE_PURE_PYTHON": "1"}, tmp_path)
    default = _run_smoke(sys.executable, env, tmp_path)
    assert forced["backend"] == "python"
    assert default["backend"] == (
        "native" if "native" in streambpe.core.available_backends() else "python"
    )
    assert (forced["ids"], forced["merges"]) == (default["ids"], default["merges"])
