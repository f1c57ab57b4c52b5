"""``make release``: the sdist and wheel built, checked and run as a newcomer would; no upload.

1. **Build as README says**, in a copy of the checkout (what a clone holds: the files git
   tracks plus new ones it does not ignore) and a throwaway venv: README's build block, run
   line by line (``pip install build && python -m build``), then ``twine check --strict``
   and the wheel's metadata (its version is ``eos_kafka_source.__version__``).
2. **Install as README says**, in a fresh venv: the block's wheel line, ``<version>`` filled
   in, with only the extras it names; ``eoskafka --version`` must name the same version.
3. **Run README's quick start** in that venv, verbatim: ``ALPHA``, ``BETA``, ``GAMMA`` once.
4. **Every other extra README's install block names brings what it needs**: the wheel's
   metadata gives each format's extra every package the code says that format imports
   (``formats/extras.py``), and in the venv, with ``[schemas]`` and ``[connect]`` added as
   README says, each codec module imports and Spark Connect's client finds its packages.
   ``[kerberos]`` builds against MIT Kerberos' headers and is left to ``make kerberos-deps``.

The same functions are the fixtures of tests/deploy/test_wheel.py, so CI (which runs that
test) runs every step; ``make release`` runs them once more and leaves the sdist and wheel
in ``dist/``.

    python -m tests.deploy.release            # make release
"""

from __future__ import annotations

import email
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tests import doc_blocks

ROOT = Path(__file__).resolve().parents[2]
#: README's blocks this module runs (keys of tests/doc_blocks.RUN).
BUILD_BLOCK = ("# in the clone: dist/eoskafka-<version>-py3-none-any.whl and "
               "dist/eoskafka-<version>.tar.gz")
QUICK_START = "# quickstart.py: copy a Kafka topic exactly once with Spark, from nothing."
#: The environment a newcomer's shell gives a command: nothing of this test session's.
_BARE = {"PATH": "/usr/bin:/bin"}


@dataclass(frozen=True)
class Built:
    dist: Path
    wheel: Path
    sdist: Path
    version: str


def run(args: list[str] | str, *, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 900) -> str:
    """Run a command (a list, or a shell line), returning stdout; raise naming it on failure."""
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, shell=isinstance(args, str))
    if proc.returncode != 0:
        raise AssertionError(f"{args} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n"
                             f"{proc.stderr[-4000:]}")
    return proc.stdout


def venv(where: Path) -> Path:
    """A fresh virtual environment (pip upgraded); its bin folder."""
    run([sys.executable, "-m", "venv", str(where)])
    return where / "bin"


def clone(dest: Path) -> Path:
    """A copy of the checkout as a clone would have it, working-tree changes included."""
    files = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                cwd=ROOT).split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():  # a file deleted in the work tree is still in git's index
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _lines(first_line: str) -> list[str]:
    """A README bash block's commands, comment lines left out."""
    text = doc_blocks.block("README.md", first_line).text
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def _in(bin_dir: Path, cwd: Path) -> dict[str, str]:
    """A shell with ``bin_dir`` activated, as ``. venv/bin/activate`` leaves it."""
    return {**_BARE, "PATH": f"{bin_dir}:{_BARE['PATH']}", "VIRTUAL_ENV": str(bin_dir.parent),
            "HOME": str(cwd)}


def build(work: Path) -> Built:
    """Step 1: README's build block in a clone and a throwaway venv; twine and metadata."""
    source = clone(work / "clone")
    tools = venv(work / "build-venv")
    env = _in(tools, work)
    (build_line,) = [ln for ln in _lines(BUILD_BLOCK) if "python -m build" in ln]
    run(build_line, cwd=source, env=env)
    run([str(tools / "python"), "-m", "pip", "install", "-q", "twine"], env=env)
    dist = source / "dist"
    (wheel,) = dist.glob("eoskafka-*.whl")
    (sdist,) = dist.glob("eoskafka-*.tar.gz")
    out = run([str(tools / "twine"), "check", "--strict", str(wheel), str(sdist)], env=env)
    assert out.count("PASSED") == 2, out
    with zipfile.ZipFile(wheel) as whl:
        meta = email.message_from_bytes(whl.read(next(
            n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))))
    version = _source_version(source)
    assert meta["Version"] == version, f"wheel says {meta['Version']}, __version__ {version}"
    assert wheel.name == f"eoskafka-{version}-py3-none-any.whl", wheel.name
    return Built(dist, wheel, sdist, version)


def _source_version(source: Path) -> str:
    text = (source / "eos_kafka_source" / "_version.py").read_text()
    found = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    assert found, "no __version__ in eos_kafka_source/_version.py"
    return found.group(1)


def install_as_readme_says(built: Built, bin_dir: Path) -> list[str]:
    """Step 2: README's wheel line (``<version>`` filled in) in the venv of ``bin_dir``,
    from the folder that holds ``dist/``; ``eoskafka --version`` must agree. Returns the
    extras it installed, which must be those the quick start's install line names."""
    (line, check) = [ln for ln in _lines(BUILD_BLOCK) if "python -m build" not in ln]
    assert line.startswith("pip install 'dist/") and check == "eoskafka --version", (line, check)
    env = _in(bin_dir, built.dist.parent)
    run(line.replace("<version>", built.version), cwd=built.dist.parent, env=env)
    said = run(check, cwd=built.dist.parent, env=env).strip()
    assert said == f"eoskafka {built.version}", said
    extras = _extras(line)
    quick_start_install = next(ln for ln in doc_blocks.block(
        "README.md", "python -m venv .venv && . .venv/bin/activate").text.splitlines()
        if ln.startswith("pip install"))
    assert extras == _extras(quick_start_install), (line, quick_start_install)
    return extras


def _extras(pip_line: str) -> list[str]:
    (spec,) = [w for w in shlex.split(pip_line.split("#")[0]) if "[" in w]
    return sorted(spec[spec.index("[") + 1:-1].split(","))


def quick_start(python: Path, cwd: Path, bootstrap: str | None = None) -> list[list[str]]:
    """Step 3: README's quick start, verbatim, with the venv's Python; the table it prints
    (header first). ``bootstrap`` sets BOOTSTRAP, as the README's own-cluster line does."""
    script = cwd / "quickstart.py"
    script.write_text(doc_blocks.block("README.md", QUICK_START).text)
    env = {**_BARE, "HOME": str(cwd), **({"BOOTSTRAP": bootstrap} if bootstrap else {})}
    out = run([str(python), str(script)], cwd=cwd, env=env)
    rows = [ln.split("|")[1:3] for ln in out.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in row] for row in rows]


EXPECTED = [["key", "value"], ["alpha", "ALPHA"], ["beta", "BETA"], ["gamma", "GAMMA"]]
INSTALL_BLOCK = "pip install .                      # source, sink and the `eoskafka` command"
#: import name -> the distribution that brings it (referencing comes with jsonschema)
_DIST = {"google.protobuf": "protobuf", "referencing": "jsonschema"}
#: README's extras checked in a venv by step 4 (kerberos needs system headers to build)
_IN_VENV = ("schemas", "connect")
_IMPORTS = """\
import importlib
from eos_kafka_source.formats import extras
for module in extras.NEEDS:
    extras.require(module)
    importlib.import_module("eos_kafka_source.formats." + module)
from pyspark.sql.connect.utils import check_dependencies
check_dependencies()
print("EXTRAS OK")
"""


def readme_extras() -> list[str]:
    """The extras README's install block names, in its order."""
    text = doc_blocks.block("README.md", INSTALL_BLOCK).text
    return [e for ln in text.splitlines() if "[" in ln.split("#")[0] for e in _extras(ln)]


def check_extras(built: Built, bin_dir: Path) -> list[str]:
    """Step 4: each format's extra declares what its codec imports (the wheel's metadata),
    and README's [schemas] and [connect], installed from the wheel in the venv of
    ``bin_dir``, bring what their code imports. Returns the extras installed."""
    from eos_kafka_source.formats import extras as format_extras

    with zipfile.ZipFile(built.wheel) as whl:
        meta = email.message_from_bytes(whl.read(next(
            n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))))
    declared: dict[str, set[str]] = {}
    for req in meta.get_all("Requires-Dist") or []:
        spec, _, marker = req.partition(";")
        found = re.search(r'extra == "([^"]+)"', marker)
        name = re.split(r"[<>=!~\[ ]", spec.strip(), maxsplit=1)[0].lower()
        declared.setdefault(found.group(1) if found else "", set()).add(name)
    named = readme_extras()
    for _, extra, packages in format_extras.NEEDS.values():
        wanted = {_DIST.get(p, p).lower() for p in packages}
        for where in (extra, "schemas"):
            assert wanted <= declared.get(where, set()), \
                f"[{where}] lacks {sorted(wanted - declared.get(where, set()))}"
    chosen = [e for e in _IN_VENV if e in named]
    assert chosen == list(_IN_VENV), f"README's install block no longer names {_IN_VENV}"
    spec = f"{built.wheel}[{','.join(chosen)}]"
    run([str(bin_dir / "python"), "-m", "pip", "install", "-q", spec],
        env=_in(bin_dir, built.dist.parent))
    script = built.dist.parent / "extras_check.py"
    script.write_text(_IMPORTS)
    out = run([str(bin_dir / "python"), str(script)], cwd=built.dist.parent, env=_BARE)
    assert "EXTRAS OK" in out, out
    return chosen


def main() -> int:
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="eoskafka-release-"))
    try:
        print(f"release: 1/4 building as README says in a clone ({work})", flush=True)
        built = build(work)
        print(f"release: built and twine-checked {built.wheel.name}, {built.sdist.name}",
              flush=True)
        print("release: 2/4 installing the wheel in a fresh venv as README says", flush=True)
        newcomer = venv(work / "newcomer")
        extras = install_as_readme_says(built, newcomer)
        print(f"release: installed with extras {extras}; eoskafka --version says "
              f"{built.version}", flush=True)
        print("release: 3/4 README's quick start, verbatim", flush=True)
        rows = quick_start(newcomer / "python", work)
        assert rows == EXPECTED, rows
        print("release: 4/4 README's other extras from the wheel", flush=True)
        checked = check_extras(built, newcomer)
        print(f"release: {checked} import what they need", flush=True)
        out = ROOT / "dist"
        out.mkdir(exist_ok=True)
        for artifact in (built.wheel, built.sdist):
            shutil.copy2(artifact, out / artifact.name)
        print(f"release: {built.version} ready in {out} ({built.wheel.name}, "
              f"{built.sdist.name}) in {time.monotonic() - started:.0f} s; nothing uploaded")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
