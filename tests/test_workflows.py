"""The GitHub workflows are valid, and they run what the README says.

Each file in .github/workflows is checked against GitHub's workflow schema (check-jsonschema's
offline copy of SchemaStore's); the test workflow runs the README's test command on Linux and every
chapter on a real MPS device; the publishing workflow only builds the book.
"""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))


def schema_errors(path: Path) -> str:
    """check-jsonschema's complaints about ``path`` ('' if it is a valid workflow)."""
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
         str(path)], capture_output=True, text=True, check=False,
    )
    return "" if result.returncode == 0 else result.stdout + result.stderr


def steps(workflow: dict, job: str) -> list[dict]:
    return workflow["jobs"][job]["steps"]


def runs(workflow: dict, job: str) -> str:
    return "\n".join(step.get("run", "") for step in steps(workflow, job))


def test_the_workflows_are_there():
    assert {path.name for path in WORKFLOWS} >= {"publish.yml", "test.yml"}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda path: path.name)
def test_workflow_matches_githubs_schema(path):
    assert schema_errors(path) == ""


def test_a_broken_workflow_is_caught(tmp_path):
    broken = tmp_path / "broken.yml"
    text = (REPO_ROOT / ".github" / "workflows" / "test.yml").read_text(encoding="utf-8")
    broken.write_text(text.replace("runs-on: ubuntu-latest", "run-on: ubuntu-latest"),
                      encoding="utf-8")
    assert "run-on" in schema_errors(broken) or "runs-on" in schema_errors(broken)


def load(name: str) -> dict:
    return yaml.safe_load((REPO_ROOT / ".github" / "workflows" / name).read_text("utf-8"))


def test_linux_job_runs_the_readme_test_command_on_every_push():
    workflow = load("test.yml")
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert "push" in triggers and "pull_request" in triggers
    job = workflow["jobs"]["linux"]
    assert job["runs-on"] == "ubuntu-latest"
    command = next(step for step in job["steps"] if step.get("run") == "bash scripts/test.sh")
    assert "download.pytorch.org/whl/cpu" in command["env"]["PIP_EXTRA_INDEX_URL"]
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert "bash scripts/test.sh" in readme
    setup = next(step for step in job["steps"] if "setup-python" in step.get("uses", ""))
    assert setup["with"]["cache"] == "pip"
    assert "actionlint" in runs(workflow, "linux")


def test_apple_job_runs_every_chapter_on_mps():
    workflow = load("test.yml")
    job = workflow["jobs"]["apple-silicon"]
    assert job["runs-on"].startswith("macos-")
    assert "tools/run_chapters_plain.py --device mps" in runs(workflow, "apple-silicon")


def test_publishing_builds_without_torch():
    text = runs(load("publish.yml"), "build")
    assert "bash scripts/build.sh" in text and "torch" not in text
