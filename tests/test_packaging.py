"""`pip install 'divscope[vllm]'` resolves beside the newest vLLM release.

pip's own resolver, in a dry run: nothing is installed, no GPU is needed. Only package metadata is
read: `--use-feature=fast-deps` reads each wheel's metadata by HTTP range requests, where an index
serves no separate metadata files (PEP 658). pip 26 and newer then download nothing else (measured
here: 2 MB of temporary files); older pips still download whole wheels (vLLM and torch: about 2.3
GB, which once filled CI's disk), so `.ci/run` upgrades pip first. It needs a package index; where
pip cannot reach one, the test skips and says so. The machine's site-wide pip constraint file
(`PIP_CONSTRAINT`, e.g. a cap on torch) is lifted for these runs: the question is whether
divscope's own pins block vLLM's, not the machine's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.network


def pip(*args: str) -> subprocess.CompletedProcess:
    """`python -m pip ARGS` with the site-wide constraint file lifted (an empty PIP_CONSTRAINT
    overrides a `constraint =` line of pip.conf)."""
    environment = {**os.environ, "PIP_CONSTRAINT": "", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, env=environment
    )


def report(*requirements: str) -> subprocess.CompletedProcess:
    """A dry run of `pip install REQUIREMENTS`; its JSON report (the packages pip would install)
    on stdout."""
    return pip(
        "install",
        "--dry-run",
        "--use-feature=fast-deps",
        "--quiet",
        "--ignore-installed",
        "--report",
        "-",
        *requirements,
    )


def versions(result: subprocess.CompletedProcess) -> dict[str, str]:
    """Name -> version of each package in a dry run's report."""
    installs = json.loads(result.stdout)["install"]
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in installs}


def refused(result: subprocess.CompletedProcess) -> bool:
    """Whether pip failed because no set of versions meets the requirements (a conflict, or a pin
    no release meets), as opposed to failing for another reason (the network, a full disk)."""
    return any(
        marker in result.stderr for marker in ("ResolutionImpossible", "No matching distribution")
    )


def failed_outside_the_resolver(result: subprocess.CompletedProcess, what: str) -> None:
    """Fail, naming pip's own error, where a dry run failed for another reason than versions
    (a full disk, a dropped connection): not a verdict on the pins, and no reason to skip."""
    if result.returncode != 0 and not refused(result):
        pytest.fail(
            f"pip's dry run of {what} failed for another reason than a conflict of versions "
            f"({last_line(result)}); its output:\n{result.stderr}"
        )


def last_line(result: subprocess.CompletedProcess) -> str:
    return (result.stderr.strip().splitlines() or ["no message"])[-1]


@pytest.fixture(scope="module")
def newest_vllm() -> str:
    """The newest vLLM that pip can install here with nothing else asked of it (a release whose
    own pins cannot be met from the index, as vLLM 0.34.0's flashinfer-python==0.7.3 could not,
    is passed over by pip alone too)."""
    probe = report("--retries", "1", "--timeout", "20", "--no-deps", "vllm")
    if probe.returncode != 0:
        pytest.skip(f"pip cannot reach a package index here ({last_line(probe)})")
    alone = report("vllm")
    failed_outside_the_resolver(alone, "vllm")
    if alone.returncode != 0:
        pytest.skip(f"vLLM does not resolve here even alone ({last_line(alone)})")
    return versions(alone)["vllm"]


def test_the_vllm_extra_resolves_with_the_newest_vllm(newest_vllm):
    together = report(f"{ROOT}[vllm]", f"vllm=={newest_vllm}")
    failed_outside_the_resolver(together, f"'divscope[vllm]' with vllm=={newest_vllm}")
    assert together.returncode == 0, (
        f"pip install 'divscope[vllm]' does not resolve with vLLM {newest_vllm}, the newest "
        f"release pip installs alone: a pin of pyproject.toml blocks it (bound the vllm extra or "
        f"widen the pin):\n{together.stderr}"
    )
    resolved = versions(together)
    assert resolved["vllm"] == newest_vllm
    assert "divscope" in resolved
