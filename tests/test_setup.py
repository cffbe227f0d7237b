"""Set-up keeps its promises: one list of supported Pythons, a lock that fits it, clear first failures.

README.md, pyproject.toml and scripts/setup.sh must name the same Python versions, and every package
pinned in requirements.txt must accept each of them (its Requires-Python, read from the installed
metadata: no network). setup.sh must stop with one line, before creating anything, for an unsupported
or missing interpreter and for a Python without the venv module (Debian without python3-venv). The
chapters' generated setup cell must stop a reader who lacks the companion package with the exact
install line. Unsupported versions and a missing ensurepip are simulated with a wrapper interpreter,
so these tests need neither other Pythons nor a network.
"""

from __future__ import annotations

import base64
import importlib.metadata
import re
import shutil
import struct
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

import sync_repo_url

REPO_ROOT = Path(__file__).resolve().parents[1]
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
SETUP_SH = (REPO_ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))


README_LINE = re.compile(r"^Supported Python versions: (.+)\.$", re.MULTILINE)
README_ITEM = re.compile(r"(3\.\d+)(?: \((3\.\d+\.\d+) or newer\))?")


def readme_pythons() -> list[str]:
    """The oldest release of each supported version, e.g. ["3.11.5", "3.12.0", "3.13.0"]."""
    match = README_LINE.search(README)
    assert match, "README.md must state 'Supported Python versions: 3.X, 3.Y.' on a line of its own"
    items = [README_ITEM.fullmatch(item.strip()) for item in match.group(1).split(",")]
    assert all(items), match.group(0)
    return [item.group(2) or f"{item.group(1)}.0" for item in items]


def readme_versions() -> list[str]:
    return [python.rsplit(".", 1)[0] for python in readme_pythons()]


def setup_sh_setting(name: str) -> str:
    match = re.search(rf'^{name}="([^"]+)"', SETUP_SH, re.MULTILINE)
    assert match, f"scripts/setup.sh must set {name}"
    return match.group(1)


def locked_requirements() -> list[Requirement]:
    lines = (REPO_ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    return [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]


def test_readme_pyproject_and_setup_sh_name_the_same_pythons():
    versions = readme_versions()
    assert versions == setup_sh_setting("SUPPORTED").split()
    assert readme_pythons()[0] == setup_sh_setting("MINIMUM")
    assert README_LINE.search(README).group(1) == setup_sh_setting("SUPPORTED_TEXT").removeprefix("Python ")
    classifiers = [
        c.removeprefix("Programming Language :: Python :: ")
        for c in PYPROJECT["project"]["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert classifiers == versions
    requires_python = SpecifierSet(PYPROJECT["project"]["requires-python"])
    assert requires_python == SpecifierSet(f">={readme_pythons()[0]}")
    assert all(requires_python.contains(python) for python in readme_pythons())


def test_every_locked_package_accepts_every_supported_python():
    refusals = []
    for requirement in locked_requirements():
        pinned = next(iter(requirement.specifier)).version
        for python in readme_pythons():  # the oldest release of each
            environment = {"python_version": python.rsplit(".", 1)[0], "python_full_version": python}
            if requirement.marker and not requirement.marker.evaluate(environment):
                continue
            try:
                installed = importlib.metadata.distribution(requirement.name)
            except importlib.metadata.PackageNotFoundError:
                pytest.fail(f"{requirement.name} is not installed: run bash scripts/setup.sh")
            assert requirement.specifier.contains(installed.version), (
                f"{requirement.name}: .venv has {installed.version}, the lock {pinned}: run bash scripts/setup.sh"
            )
            requires = SpecifierSet(installed.metadata.get("Requires-Python") or "")
            if not requires.contains(python):
                refusals.append(f"{requirement.name}=={pinned} needs Python {requires}, not {python}")
    assert not refusals, "the lock does not install on a Python the README names:\n" + "\n".join(refusals)


def test_ci_runs_exactly_the_documented_test_command():
    # The test command is the maintainers' (MAINTAINING.md); README.md speaks to readers.
    ci_commands = [line for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("bash ")]
    assert ci_commands == ["bash scripts/test.sh"]
    maintaining = (REPO_ROOT / "MAINTAINING.md").read_text(encoding="utf-8")
    assert re.search(r"^bash scripts/test\.sh\b", maintaining, re.MULTILINE)


# --- setup.sh's first failures ------------------------------------------------------------------


@pytest.fixture
def project(tmp_path):
    """An empty project holding only scripts/setup.sh: whatever it would create shows up here."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO_ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    return tmp_path


def fake_python(folder: Path, version: str | None = None, without_venv: bool = False) -> Path:
    """This interpreter, reporting another version and/or missing ensurepip (as Debian's python3)."""
    site = folder / "site"
    site.mkdir(parents=True)
    if version:
        major, minor, micro = map(int, version.split("."))
        (site / "sitecustomize.py").write_text(
            f"import sys\nsys.version_info = ({major}, {minor}, {micro}, 'final', 0)\n"
        )
    if without_venv:
        (site / "ensurepip.py").write_text("raise ImportError('no ensurepip: python3-venv is not installed')\n")
    wrapper = folder / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def run_setup(project: Path, python: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "scripts/setup.sh"],
        check=False,  # the tests read the exit status
        cwd=project,
        env={"PATH": "/usr/bin:/bin", "PYTHON": str(python)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_one_line_stop(result: subprocess.CompletedProcess, project: Path, *phrases: str) -> None:
    assert result.returncode == 1, result
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one line, got:\n{result.stderr}"
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    assert not (project / ".venv").exists(), "setup.sh created .venv before stopping"


SUPPORTED_TEXT = README_LINE.search(README).group(1) if README_LINE.search(README) else "?"


@pytest.mark.parametrize("version", ["3.10.13", "3.11.2", "3.14.0", "2.7.18"])  # 3.11.2: Debian 12
def test_unsupported_python_stops_at_once_with_one_line(project, tmp_path, version):
    python = fake_python(tmp_path / "fake", version=version)
    result = run_setup(project, python)
    assert_one_line_stop(
        result, project, f"Python {version}", SUPPORTED_TEXT, "PYTHON=python3.12 bash scripts/build.sh"
    )


def test_missing_interpreter_stops_with_one_line(project):
    result = run_setup(project, "python3.99-not-installed")
    assert_one_line_stop(result, project, "python3.99-not-installed", SUPPORTED_TEXT, "PYTHON=")


@pytest.mark.parametrize("version", ["3.11.5", "3.12.0", "3.13.9"])
def test_missing_venv_module_stops_with_one_line(project, tmp_path, version):
    # A supported version passes the version check and reaches the venv check.
    python = fake_python(tmp_path / "fake", version=version, without_venv=True)
    result = run_setup(project, python)
    minor = version.rsplit(".", 1)[0]
    assert_one_line_stop(result, project, "no venv module", "apt-get install python3-venv", f"python{minor}-venv")


def test_existing_venv_of_another_python_is_named(project, tmp_path):
    (project / ".venv" / "bin").mkdir(parents=True)
    (project / ".venv" / "bin" / "python").symlink_to(fake_python(tmp_path / "old", version="3.10.13"))
    result = run_setup(project, fake_python(tmp_path / "new", version="3.12.1"))
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result
    assert "Python 3.10.13" in result.stderr and "rm -rf .venv" in result.stderr


# --- the chapters' generated setup cell ------------------------------------------------------------


def test_setup_cell_stops_without_the_package_and_gives_the_install_line(tmp_path):
    # `python -S` has no site-packages: neither the companion package nor torch/altair/pandas.
    source = sync_repo_url.setup_source()
    result = subprocess.run(
        [sys.executable, "-S", "-c", source], check=False, cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 1
    assert "This chapter needs the book's companion package" in result.stderr
    assert sync_repo_url.install_line() in result.stderr
    # What Jupyter shows instead of a traceback: the message alone.
    shown = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            (
                f"try:\n    exec({source!r})\nexcept ModuleNotFoundError as error:"
                "\n    print(error._render_traceback_())"
            ),
        ],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    [line] = eval(shown.stdout)
    assert line.startswith("This chapter needs") and line.endswith(sync_repo_url.install_line())


def test_setup_cell_does_nothing_when_the_package_is_installed(capsys):
    exec(sync_repo_url.setup_source(), {})  # noqa: S102 (the chapters' setup cell, run as Jupyter runs it)
    assert capsys.readouterr() == ("", "")


def test_setup_cell_installs_the_pinned_package_in_colab(monkeypatch):
    calls = []
    monkeypatch.setitem(sys.modules, "google.colab", object())
    monkeypatch.setattr(subprocess, "run", lambda command, check: calls.append(command))
    exec(sync_repo_url.setup_source(), {})  # noqa: S102 (the chapters' setup cell, run as Jupyter runs it)
    assert calls == [[sys.executable, "-m", "pip", "install", "--quiet", sync_repo_url.package_spec()]]


def test_setup_cell_lines_fit_the_style():
    assert max(len(line) for line in sync_repo_url.setup_source().splitlines()) <= 88


def test_badge_image_is_inline_so_it_shows_anywhere():
    badge = sync_repo_url.badge(REPO_ROOT / "book" / "01_positional_encoding.ipynb")
    image = re.fullmatch(r"\[!\[Open in Colab\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)\]\((https://[^)]+)\)", badge)
    assert image, badge
    png = base64.b64decode(image.group(1), validate=True)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (117, 20)  # the size of book/_static/colab-badge.svg
