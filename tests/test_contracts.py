"""Code that cites docs/contracts.md names a section that exists there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# `docs/contracts.md, "Cross-sample results"`; the name may wrap across lines of a docstring.
CITATION = re.compile(r'docs/contracts\.md, "([^"]+)"')


def test_cited_contract_sections_exist():
    headings = re.findall(r"^## (.+)$", (ROOT / "docs/contracts.md").read_text(), re.M)
    citations = [
        (path.relative_to(ROOT), " ".join(name.split()))
        for folder in ("divscope", "tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for name in CITATION.findall(path.read_text(encoding="utf-8"))
    ]
    assert len(citations) >= 8  # the citations this test was written for are found
    missing = [(p, n) for p, n in citations if not any(h.startswith(n) for h in headings)]
    assert not missing, f"no such section in docs/contracts.md: {missing}"
