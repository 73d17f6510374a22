"""constraints.txt from the running environment, the drift of the environment from it, and
constraints-lowest.txt from pyproject.toml's lower bounds.

    python .ci/constraints.py freeze         print a constraints file of this environment
    python .ci/constraints.py drift FILE     list the packages whose version differs from FILE;
                                             exit 1 if any does
    python .ci/constraints.py lowest         print constraints-lowest.txt: each dependency of
                                             pyproject.toml (runtime, `big` and `dev`) at its
                                             lower bound, and what those need, as pip resolves
                                             them (wheels only) for this Python
    python .ci/constraints.py stale FILE     exit 1 (naming them) if FILE does not pin every
                                             dependency at pyproject.toml's lower bound

Left out: torch, triton and nvidia-* (hardware-specific; the README's commands pin torch; `lowest`
pins torch, at its lower bound), pip (the installer, not a dependency) and divscope itself;
setuptools stays (torch needs it at run time).
Standard library only, so that any fresh environment can run it.
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
import tempfile
import tomllib
from datetime import date
from pathlib import Path

HEADER = """\
# Exact, known-good versions of every runtime and dev dependency of divscope, transitive ones
# included: `pip install torch==2.13.0 -e '.[dev]' -c constraints.txt`. torch, triton and nvidia-*
# are left out (they depend on the hardware; the README's commands pin torch).
# Written by `bash .ci/newest --write` on {date}, Python {python} ({system} {machine}): the newest
# releases, installed in a fresh virtual environment, passed `python -m pytest` there. To refresh:
# run that command, review `git diff constraints.txt`, commit. Other Pythons may need other pins.
"""

LOWEST_HEADER = """\
# The oldest supported version of every runtime, `big` and `dev` dependency of divscope (the lower
# bounds of pyproject.toml) and the packages those need, at the newest versions pip resolves for
# them (wheels only), for Python {python} ({system} {machine}). torch is pinned here (its lower
# bound); triton and nvidia-* are left out. `bash .ci/lowest` installs it and runs the suite's
# dependency-facing part. Written by `python .ci/constraints.py lowest` on {date}; it rewrites
# this file itself when pyproject.toml's lower bounds move.
"""

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
# The extras whose dependencies the lowest environment holds (vllm and docs are not tested there).
LOWEST_EXTRAS = ("big", "dev")
LEFT_OUT = ("pip", "divscope")


def normalized(name: str) -> str:
    """PEP 503 name: lower case, runs of `-`, `_`, `.` as one `-`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def hardware_specific(name: str) -> bool:
    return name in ("torch", "triton") or name.startswith("nvidia-")


def installed() -> dict[str, tuple[str, str]]:
    """Normalized name -> (name as released, version) of every installed distribution."""
    freeze = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--all", "--exclude-editable"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    pins = {}
    for line in freeze.splitlines():
        name, sep, version = line.partition("==")
        if sep and not hardware_specific(normalized(name)) and normalized(name) not in LEFT_OUT:
            pins[normalized(name)] = (name, version)
    return pins


def read_pins(path: str) -> dict[str, str]:
    """Normalized name -> version of each `name==version` line of a constraints file."""
    pins = {}
    with open(path, encoding="utf-8") as file:
        for number, raw in enumerate(file, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            name, sep, version = line.partition("==")
            if not sep:
                sys.exit(f"{path}:{number}: expected name==version, got {line!r}")
            pins[normalized(name.strip())] = version.strip()
    return pins


def lower_bounds() -> dict[str, tuple[str, str]]:
    """Normalized name -> (name as written, lower bound) of each dependency in pyproject.toml
    (runtime and LOWEST_EXTRAS); exits naming a dependency that has no `>=` bound."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in LOWEST_EXTRAS:
        requirements += project["optional-dependencies"][extra]
    bounds = {}
    for requirement in requirements:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^]]*\])?\s*([^;]*)", requirement)
        name, specifiers = match.group(1), match.group(3)
        lower = re.search(r">=\s*([^,\s]+)", specifiers)
        if lower is None:
            sys.exit(f"{PYPROJECT}: {requirement!r} has no lower bound (>=); give it one")
        bounds[normalized(name)] = (name, lower.group(1))
    return bounds


def lowest() -> None:
    """Resolve the lower bounds with pip (a dry run: nothing is installed) and print them."""
    pins = [f"{name}=={version}" for name, version in lower_bounds().values()]
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        # --isolated: the resolution is this file's, not the machine's (no site constraint file).
        pip = [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check"]
        install = ["install", "--dry-run", "--quiet", "--ignore-installed", "--only-binary=:all:"]
        resolved = subprocess.run(
            [*pip, *install, "--report", str(report), *pins], capture_output=True, text=True
        )
        if resolved.returncode != 0:
            sys.exit(
                f"pip cannot install pyproject.toml's lower bounds together ({' '.join(pins)}):\n"
                f"{resolved.stderr.strip()}\nmove the bounds it names so that they fit together."
            )
        installs = json.loads(report.read_text(encoding="utf-8"))["install"]
    print(
        LOWEST_HEADER.format(
            date=date.today().isoformat(),
            python=platform.python_version(),
            system=platform.system().lower(),
            machine=platform.machine(),
        ),
        end="",
    )
    metadata = [item["metadata"] for item in installs]
    versions = {normalized(m["name"]): (m["name"], m["version"]) for m in metadata}
    for key, (name, version) in sorted(versions.items()):
        if key == "torch" or not (hardware_specific(key) or key in LEFT_OUT):
            print(f"{name}=={version}")


def stale(path: str) -> int:
    pinned, bounds = read_pins(path), lower_bounds()
    lines = [
        f"  {key}: {pinned.get(key, '(not pinned)')} in {path}, >={bound} in pyproject.toml"
        for key, (_, bound) in sorted(bounds.items())
        if not same_version(pinned.get(key), bound)
    ]
    if lines:
        print("\n".join(lines))
    return 1 if lines else 0


def same_version(pinned: str | None, bound: str) -> bool:
    """`2.6` and `2.6.0` are one version (trailing zeros do not count)."""

    def release(version: str) -> list[str]:
        parts = version.split(".")
        while len(parts) > 1 and parts[-1] == "0":
            parts.pop()
        return parts

    return pinned is not None and release(pinned) == release(bound)


def freeze() -> None:
    print(
        HEADER.format(
            date=date.today().isoformat(),
            python=platform.python_version(),
            system=platform.system().lower(),
            machine=platform.machine(),
        ),
        end="",
    )
    for _, (name, version) in sorted(installed().items()):
        print(f"{name}=={version}")


def drift(path: str) -> int:
    pinned, current = read_pins(path), installed()
    lines = []
    for key in sorted(pinned.keys() | current.keys()):
        old, new = pinned.get(key), current.get(key, (key, None))[1]
        if old != new:
            lines.append(f"  {key}: {old or '(not pinned)'} -> {new or '(not installed)'}")
    print("\n".join(lines) if lines else f"  every package as in {path}")
    return 1 if lines else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["freeze"]:
        freeze()
    elif len(sys.argv) == 3 and sys.argv[1] == "drift":
        sys.exit(drift(sys.argv[2]))
    elif sys.argv[1:] == ["lowest"]:
        lowest()
    elif len(sys.argv) == 3 and sys.argv[1] == "stale":
        sys.exit(stale(sys.argv[2]))
    else:
        sys.exit(__doc__)
