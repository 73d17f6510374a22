"""constraints.txt from the running environment, and the drift of the environment from it.

    python .ci/constraints.py freeze         print a constraints file of this environment
    python .ci/constraints.py drift FILE     list the packages whose version differs from FILE;
                                             exit 1 if any does

Left out: torch, triton and nvidia-* (hardware-specific; the README's commands pin torch), pip (the
installer, not a dependency) and divscope itself; setuptools stays (torch needs it at run time).
Standard library only, so that any fresh environment can run it.
"""

from __future__ import annotations

import platform
import re
import subprocess
import sys
from datetime import date

HEADER = """\
# Exact, known-good versions of every runtime and dev dependency of divscope, transitive ones
# included: `pip install torch==2.13.0 -e '.[dev]' -c constraints.txt`. torch, triton and nvidia-*
# are left out (they depend on the hardware; the README's commands pin torch).
# Written by `bash .ci/newest --write` on {date}, Python {python} ({system} {machine}): the newest
# releases, installed in a fresh virtual environment, passed `python -m pytest` there. To refresh:
# run that command, review `git diff constraints.txt`, commit. Other Pythons may need other pins.
"""


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
    else:
        sys.exit(__doc__)
