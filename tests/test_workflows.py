"""The GitHub workflows are valid, and they can pass on GitHub's runners.

Each file in .github/workflows is checked against GitHub's workflow schema (check-jsonschema's
offline copy of SchemaStore's). Then the properties a newcomer relies on, each checked by a function
that returns its complaints, and each shown to complain about a workflow that breaks it:

* the test workflow runs the test command (MAINTAINING.md's) on Ubuntu (x86) and on an Apple-silicon runner's
  CPU, and claims no GPU there (GitHub's arm64 macOS runners have none: actions/runner-images#9918,
  #11899);
* actionlint runs in a job of its own, which waits for no test;
* a pull request from a branch of this repository is not tested a second time (its push was);
* publishing needs the tests (publish.yml calls test.yml), is never cancelled midway, and caches pip;
* the published build pins the chapters' setup cells to the commit it was built from.
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))
TEST_COMMAND = "bash scripts/test.sh"


def schema_errors(path: Path) -> str:
    """check-jsonschema's complaints about ``path`` ('' if it is a valid workflow)."""
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    return "" if result.returncode == 0 else result.stdout + result.stderr


def load(name: str) -> dict:
    return yaml.safe_load((REPO_ROOT / ".github" / "workflows" / name).read_text("utf-8"))


def triggers(workflow: dict) -> dict:
    on = workflow[True]  # YAML 1.1 reads the key `on` as True
    return {name: {} for name in on} if isinstance(on, list) else {k: v or {} for k, v in on.items()}


def runs(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job.get("steps", []))


def needs(job: dict) -> list[str]:
    value = job.get("needs", [])
    return [value] if isinstance(value, str) else list(value)


# --- A small evaluator for the `if:` expressions the workflows use -------------------------------

EXPRESSION_TOKEN = re.compile(r"\s*(\|\||&&|!=|==|\(|\)|!|'[^']*'|[A-Za-z_][\w.-]*)")


def evaluate(expression: str, context: dict) -> bool:
    """Evaluate a GitHub Actions condition made of ``a.b.c`` lookups, string literals, ==, !=, !, &&,
    || and parentheses (what these workflows use; anything else raises, so the test fails)."""
    tokens = []
    position = 0
    text = expression.strip().removeprefix("${{").removesuffix("}}").strip()
    while position < len(text):
        match = EXPRESSION_TOKEN.match(text, position)
        if not match:
            raise ValueError(f"cannot read {text[position:]!r} in {expression!r}")
        tokens.append(match.group(1))
        position = match.end()

    def lookup(name):
        value = context
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value

    def parse_chain(i, operator, parse_operand):
        """Operands joined by ``operator`` (|| or &&), left to right."""
        value, i = parse_operand(i)
        while i < len(tokens) and tokens[i] == operator:
            right, i = parse_operand(i + 1)
            value = (value or right) if operator == "||" else (value and right)
        return value, i

    def parse_or(i):
        return parse_chain(i, "||", parse_and)

    def parse_and(i):
        return parse_chain(i, "&&", parse_comparison)

    def parse_comparison(i):
        value, i = parse_unary(i)
        if i < len(tokens) and tokens[i] in ("==", "!="):
            operator = tokens[i]
            right, i = parse_unary(i + 1)
            value = (value == right) if operator == "==" else (value != right)
        return value, i

    def parse_unary(i):
        token = tokens[i]
        if token == "!":
            value, i = parse_unary(i + 1)
            return not value, i
        if token == "(":
            value, i = parse_or(i + 1)
            assert tokens[i] == ")", expression
            return value, i + 1
        if token.startswith("'"):
            return token[1:-1], i + 1
        return lookup(token), i + 1

    value, end = parse_or(0)
    if end != len(tokens):
        raise ValueError(f"cannot read {expression!r}")
    return bool(value)


def github_context(event: str, head_repository: str | None = None, ref: str = "refs/heads/topic") -> dict:
    event_payload = {}
    if event == "pull_request":
        event_payload = {"pull_request": {"head": {"repo": {"full_name": head_repository}}}}
    return {"github": {"event_name": event, "repository": "owner/book", "ref": ref, "event": event_payload}}


def job_runs(job: dict, context: dict) -> bool:
    condition = job.get("if")
    return True if condition is None else evaluate(str(condition), context)


# --- The properties, each a function returning its complaints -------------------------------------


def jobs_running_test_command(workflow: dict) -> dict[str, dict]:
    return {name: job for name, job in workflow["jobs"].items() if TEST_COMMAND in runs(job).splitlines()}


def check_test_workflow(workflow: dict) -> list[str]:
    problems = []
    jobs = jobs_running_test_command(workflow)
    systems = {name: str(job.get("runs-on", "")) for name, job in jobs.items()}
    if not any(system.startswith("ubuntu-") for system in systems.values()):
        problems.append(f"no job runs `{TEST_COMMAND}` on Ubuntu: {systems}")
    # macos-14 and later are arm64 images (macos-13 and the -large images are Intel).
    apple = [
        name
        for name, system in systems.items()
        if re.fullmatch(r"macos-(1[4-9]|[2-9]\d)|macos-latest|macos-\d+-xlarge", system)
    ]
    if not apple:
        problems.append(f"no job runs `{TEST_COMMAND}` on an Apple-silicon runner: {systems}")
    for name, job in workflow["jobs"].items():
        if str(job.get("runs-on", "")).startswith("macos-"):
            text = yaml.safe_dump(job).lower()
            if "--device mps" in text or "gpu (mps)" in text or "apple's gpu" in text:
                problems.append(f"job {name} claims to run on MPS, which GitHub's macOS runners do not have")
            if job.get("env", {}).get("BOOK_NBVAL_KERNELS") in ("avx2", "default") or any(
                step.get("env", {}).get("BOOK_NBVAL_KERNELS", "native") in ("avx2", "default")
                for step in job.get("steps", [])
            ):
                problems.append(f"job {name} asks an ARM CPU for x86 kernels")
    for name, job in jobs.items():
        setup = [step for step in job.get("steps", []) if "setup-python" in step.get("uses", "")]
        if not setup or setup[0].get("with", {}).get("cache") != "pip":
            problems.append(f"job {name} has no pip cache")
    lint = {name: job for name, job in workflow["jobs"].items() if "actionlint" in runs(job)}
    if not lint:
        problems.append("no job runs actionlint")
    for name, job in lint.items():
        if needs(job):
            problems.append(f"actionlint's job {name} waits for {needs(job)}: a failing test would hide it")
        if TEST_COMMAND in runs(job):
            problems.append(f"actionlint runs in the test job {name}: a failing test would hide it")
    on = triggers(workflow)
    for event in ("pull_request", "workflow_call"):
        if event not in on:
            problems.append(f"test.yml is not run on {event}")
    if "main" not in on.get("push", {}).get("branches-ignore", []):
        problems.append("test.yml's push trigger includes main, which publish.yml tests already")
    for name, job in workflow["jobs"].items():
        if not job_runs(job, github_context("push")):
            problems.append(f"job {name} does not run on a push")
        if not job_runs(job, github_context("pull_request", head_repository="someone/fork")):
            problems.append(f"job {name} does not run on a fork's pull request")
        if job_runs(job, github_context("pull_request", head_repository="owner/book")):
            problems.append(f"job {name} runs again on a pull request from this repository (its push ran it)")
    return problems


def check_publish_workflow(workflow: dict) -> list[str]:
    problems = []
    jobs = workflow["jobs"]
    calls = [name for name, job in jobs.items() if job.get("uses") == "./.github/workflows/test.yml"]
    if not calls:
        problems.append("publish.yml does not call the test workflow")
    builders = [name for name, job in jobs.items() if "bash scripts/build.sh" in runs(job)]
    if not builders:
        problems.append("no job builds the book with scripts/build.sh")
    for name in builders:
        if "torch" in runs(jobs[name]):
            problems.append(f"job {name} installs torch, which building the book does not need")
        if not set(needs(jobs[name])) & set(calls):
            problems.append(f"job {name} builds the book without waiting for the tests")
        setup = [step for step in jobs[name]["steps"] if "setup-python" in step.get("uses", "")]
        if not setup or setup[0].get("with", {}).get("cache") != "pip":
            problems.append(f"job {name} has no pip cache")
        pinned = [step for step in jobs[name]["steps"] if "bash scripts/build.sh" in step.get("run", "")]
        if pinned[0].get("env", {}).get("BOOK_PIN_REF") != "${{ github.sha }}":
            problems.append(f"job {name} does not pin the chapters' setup cells to the commit (BOOK_PIN_REF)")
    deployers = [
        name
        for name, job in jobs.items()
        if any("deploy-pages" in step.get("uses", "") for step in job.get("steps", []))
    ]
    if not deployers:
        problems.append("no job deploys to Pages")
    for name in deployers:
        if not set(needs(jobs[name])) & set(builders):
            problems.append(f"job {name} deploys without waiting for the build")
    for where, concurrency in [("workflow", workflow.get("concurrency"))] + [
        (f"job {name}", job.get("concurrency")) for name, job in jobs.items()
    ]:
        if isinstance(concurrency, dict) and concurrency.get("cancel-in-progress") not in (None, False, "false"):
            problems.append(f"{where} may cancel a deployment midway (cancel-in-progress)")
    on = triggers(workflow)
    if on.get("push", {}).get("branches") != ["main"] or "pull_request" in on:
        problems.append(f"publish.yml must run on pushes to main only, not on {sorted(on)}")
    return problems


# --- The tests -----------------------------------------------------------------------------------


def test_the_workflows_are_there():
    assert {path.name for path in WORKFLOWS} >= {"publish.yml", "test.yml"}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda path: path.name)
def test_workflow_matches_githubs_schema(path):
    assert schema_errors(path) == ""


def test_a_broken_workflow_is_caught(tmp_path):
    broken = tmp_path / "broken.yml"
    text = (REPO_ROOT / ".github" / "workflows" / "test.yml").read_text(encoding="utf-8")
    broken.write_text(text.replace("runs-on: ubuntu-latest", "run-on: ubuntu-latest"), encoding="utf-8")
    assert "run-on" in schema_errors(broken) or "runs-on" in schema_errors(broken)


def test_the_test_workflow_has_every_property():
    assert check_test_workflow(load("test.yml")) == []


def test_the_publishing_workflow_has_every_property():
    assert check_publish_workflow(load("publish.yml")) == []


def test_maintaining_names_the_test_command():
    maintaining = (REPO_ROOT / "MAINTAINING.md").read_text(encoding="utf-8")
    assert re.search(rf"^{re.escape(TEST_COMMAND)}\b", maintaining, re.MULTILINE)


def test_the_expression_evaluator_reads_the_conditions():
    condition = (
        "github.event_name != 'pull_request' || github.event.pull_request.head.repo.full_name != github.repository"
    )
    assert evaluate(condition, github_context("push"))
    assert evaluate(condition, github_context("pull_request", "someone/fork"))
    assert not evaluate(condition, github_context("pull_request", "owner/book"))
    assert evaluate("${{ !(github.ref == 'refs/heads/main') && github.event_name == 'push' }}", github_context("push"))
    assert not evaluate("!(github.ref == 'refs/heads/main')", github_context("push", ref="refs/heads/main"))
    with pytest.raises(ValueError):
        evaluate("contains(github.ref, 'main')", github_context("push"))


def mutated(name: str, change) -> dict:
    workflow = copy.deepcopy(load(name))
    change(workflow)
    return workflow


def set_run(job: dict, old: str, new: str) -> None:
    for step in job["steps"]:
        if "run" in step:
            step["run"] = step["run"].replace(old, new)


TEST_WORKFLOW_BREAKAGES = {
    "the Apple job runs chapters on MPS again": (
        lambda w: set_run(
            w["jobs"]["apple-silicon"],
            "bash scripts/test.sh",
            "bash scripts/test.sh\nPYTHONPATH=src python tools/run_chapters_plain.py --device mps",
        ),
        "claims to run on MPS",
    ),
    "the Apple job runs no test command": (
        lambda w: set_run(w["jobs"]["apple-silicon"], "bash scripts/test.sh", "bash scripts/build.sh"),
        "Apple-silicon runner",
    ),
    "the Apple job on an Intel image": (
        lambda w: w["jobs"]["apple-silicon"].update({"runs-on": "macos-13"}),
        "Apple-silicon runner",
    ),
    "x86 kernels on ARM": (
        lambda w: w["jobs"]["apple-silicon"]["steps"][-1]["env"].update(BOOK_NBVAL_KERNELS="avx2"),
        "x86 kernels",
    ),
    "actionlint after the tests": (lambda w: w["jobs"]["actionlint"].update(needs=["linux"]), "waits for"),
    "actionlint inside the test job": (
        lambda w: (w["jobs"].pop("actionlint"), w["jobs"]["linux"]["steps"].append({"run": "actionlint"})),
        "runs in the test job",
    ),
    "pull requests run twice": (lambda w: w["jobs"]["linux"].pop("if"), "runs again on a pull request"),
    "main tested twice": (lambda w: w[True]["push"].pop("branches-ignore"), "includes main"),
    "not callable by publish.yml": (lambda w: w[True].pop("workflow_call"), "workflow_call"),
    "no pip cache": (lambda w: w["jobs"]["linux"]["steps"][1]["with"].pop("cache"), "no pip cache"),
}

PUBLISH_WORKFLOW_BREAKAGES = {
    "publishing without the tests": (lambda w: w["jobs"]["build"].pop("needs"), "without waiting for the tests"),
    "the test workflow not called": (lambda w: w["jobs"].pop("test"), "does not call the test workflow"),
    "a deployment cancelled midway": (
        lambda w: w["concurrency"].update({"cancel-in-progress": True}),
        "cancel a deployment",
    ),
    "no pip cache": (lambda w: w["jobs"]["build"]["steps"][1]["with"].pop("cache"), "no pip cache"),
    "setup cells not pinned": (lambda w: w["jobs"]["build"]["steps"][2].pop("env"), "BOOK_PIN_REF"),
    "deploying before the build": (lambda w: w["jobs"]["deploy"].pop("needs"), "without waiting for the build"),
}


@pytest.mark.parametrize("breakage", TEST_WORKFLOW_BREAKAGES)
def test_a_test_workflow_without_a_property_is_caught(breakage):
    change, complaint = TEST_WORKFLOW_BREAKAGES[breakage]
    problems = check_test_workflow(mutated("test.yml", change))
    assert any(complaint in problem for problem in problems), problems


@pytest.mark.parametrize("breakage", PUBLISH_WORKFLOW_BREAKAGES)
def test_a_publishing_workflow_without_a_property_is_caught(breakage):
    change, complaint = PUBLISH_WORKFLOW_BREAKAGES[breakage]
    problems = check_publish_workflow(mutated("publish.yml", change))
    assert any(complaint in problem for problem in problems), problems


def test_no_claim_of_a_real_mps_run_remains():
    """GitHub's macOS runners have no MPS, and no chapter has run on a real Apple GPU."""
    texts = {
        path.relative_to(REPO_ROOT).as_posix(): path.read_text(encoding="utf-8")
        for path in [REPO_ROOT / "README.md", *WORKFLOWS, *(REPO_ROOT / "book").glob("*.md")]
        + sorted(REPO_ROOT.glob("*.md"))
    }
    # What the README and the workflow said before: "every chapter on a real Apple GPU (macOS 15, MPS)",
    # "the chapters on Apple's GPU (macOS)", "Every chapter on Apple's GPU (MPS)".
    claims = re.compile(r"(chapters?|\bruns) on (a real Apple|Apple's) GPU|GPU \(MPS\)|GPU \(macOS", re.IGNORECASE)
    found = {name: claims.search(text).group(0) for name, text in texts.items() if claims.search(text)}
    assert found == {}
    assert claims.search("GitHub runs every chapter on a real Apple GPU (macOS 15, MPS).")
    assert claims.search("name: Every chapter on Apple's GPU (MPS)")
    assert not claims.search("No chapter has run on a real Apple GPU: GitHub's macOS runners have none")
