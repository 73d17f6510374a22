"""Docs that stay true: cited contract sections exist, the modules that teach by example keep
their examples, every `divscope` command the Markdown docs (the README, the lab's, every page of
`docs/`) show exists with the flags they give it, and the README stays short. Pytest runs every
`>>>` example of the package (`--doctest-modules` over `divscope`, see pyproject.toml)."""

from __future__ import annotations

import doctest
import importlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup
from typer.main import get_command

from divscope.cli import app

ROOT = Path(__file__).resolve().parents[1]
# `docs/contracts.md, "Cross-sample results"`; the name may wrap across lines of a docstring.
CITATION = re.compile(r'docs/contracts\.md, "([^"]+)"')

MODULES_WITH_EXAMPLES = [
    *(f"divscope.analyses.{name}" for name in (
        "alignment", "controls", "coverage", "cross_sample", "cross_sample_report",
        "distribution", "evolution", "failure", "flips", "position", "sampling", "shift",
        "summary", "switches", "tokens",
    )),
    "divscope.answers", "divscope.estimators", "divscope.formatting",
    "divscope.generation",
    *(f"divscope.grading.{name}" for name in (
        "accuracy", "exact_grader", "math_grader", "pool", "registry", "table",
    )),
    "divscope.lab", "divscope.lab.task", "divscope.lab.grpo", "divscope._lazy",
    *(f"divscope.models.{name}" for name in ("head", "lengths", "placement", "threads")),
]  # fmt: skip


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


@pytest.mark.parametrize("name", MODULES_WITH_EXAMPLES)
def test_module_keeps_runnable_examples(name):
    tests = doctest.DocTestFinder().find(importlib.import_module(name))
    runnable = [
        example
        for test in tests
        for example in test.examples
        if not example.options.get(doctest.SKIP)
    ]
    assert runnable, f"{name} has no runnable `>>>` example left"


# ---------------------------------------------------------------- commands shown in the docs

DOCUMENTED = [
    "README.md",
    "fixtures/lab/README.md",
    *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").rglob("*.md")),
]
"""The Markdown files whose `divscope` commands are checked: the README, the lab's, every page
of the docs site."""
README_LINES = 250
"""The README's length at most: the question, the set-up, the headline, the command list; the
reference is the docs site."""
# A fenced block: its info string, then its text.
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
SHELL_BLOCKS = {"", "bash", "sh", "shell", "console", "text"}
INLINE = re.compile(r"`([^`]+)`")  # an inline code span; it may wrap lines
OPERATORS = {"&&", "||", ";", "|", "&"}
# A bare `divscope` word is the command (after `-m` too: torchrun, python -m), except as the
# package a package manager is given (`pip install -U divscope`).
PACKAGE_VERBS = {"install", "uninstall", "show", "download"}
FLAG = re.compile(r"--?[A-Za-z][\w-]*")


@dataclass(frozen=True)
class Shown:
    """One `divscope` invocation in a doc."""

    where: str
    """`file:line`."""
    args: tuple[str, ...]
    """Everything after `divscope`: the (sub)command, its arguments and options."""
    concrete: bool
    """A command to run, parsed whole; else a synopsis (`[--top-p 0.7]`, `...`) or a fragment in
    prose (`divscope analyze --cross-sample`), whose flags alone are checked."""


def _logical_lines(code: str, first: int) -> list[tuple[int, str]]:
    """`code`'s lines with `\\` continuations and indented continuation lines (the synopses')
    joined, each with the doc line it starts on (`first`: the doc line of the code's first)."""
    lines: list[tuple[int, str]] = []
    for number, raw in enumerate(code.splitlines(), first):
        continued = lines and (lines[-1][1].endswith("\\") or raw[:1] in (" ", "\t"))
        if continued and raw.strip():
            start, text = lines[-1]
            lines[-1] = (start, text.removesuffix("\\").rstrip() + " " + raw.strip())
        else:
            lines.append((number, raw.rstrip()))
    return lines


def _invocations(code: str, where: str, *, concrete: bool) -> list[Shown]:
    """Every `divscope` in command position on the shell line `code`; concrete when `concrete`
    and the line has no synopsis brackets or ellipsis.

    Raises:
        ValueError: the line does not split as a shell line (an unclosed quote), naming `where`.
    """
    try:
        tokens = shlex.split(code, comments=True)
    except ValueError as error:
        raise ValueError(f"{where}: {error} in {code!r}") from error
    synopsis = any(t.startswith("[") or t.endswith("]") or "..." in t for t in tokens)
    shown = []
    for i, token in enumerate(tokens):
        before = tokens[i - 1] if i else ""
        option = before.startswith("-") and before != "-m"  # `pip install -U divscope`
        if token != "divscope" or option or before in PACKAGE_VERBS:
            continue
        args = []
        for arg in tokens[i + 1 :]:
            if not synopsis and (arg in OPERATORS or re.match(r"\d*[<>]", arg)):
                break  # the next command of the line, or a redirection
            args.append(arg)
        shown.append(Shown(where, tuple(args), concrete and not synopsis))
    return shown


def shown_commands(text: str, source: str) -> list[Shown]:
    """Every `divscope` invocation of the Markdown `text` (of the file `source`): in shell code
    blocks (commands to run, synopses) and in inline code spans (fragments)."""
    shown = []
    for block in FENCE.finditer(text):
        if block.group(2).lower() not in SHELL_BLOCKS:
            continue
        first = text.count("\n", 0, block.start(3)) + 1
        for line, code in _logical_lines(block.group(3), first):
            shown += _invocations(code, f"{source}:{line}", concrete=True)
    prose = FENCE.sub(lambda block: "\n" * block.group(0).count("\n"), text)
    for span in INLINE.finditer(prose):
        if "divscope " in span.group(1):
            line = prose.count("\n", 0, span.start()) + 1
            code = " ".join(span.group(1).split())
            shown += _invocations(code, f"{source}:{line}", concrete=False)
    return shown


def problem(shown: Shown) -> str | None:
    """What is wrong with `shown`: a name that is not a command, a flag its command lacks, or
    (a concrete one) arguments its command line refuses, parsed without running the command;
    None when nothing is."""
    command, names, args = get_command(app), ["divscope"], shown.args
    context = typer.Context(command)
    # Names lead to a command through its groups (`lab build`); `divscope ...` names none.
    while isinstance(command, TyperGroup) and args and not args[0].startswith(("-", "...")):
        names.append(args[0])
        command, args = command.get_command(context, args[0]), args[1:]
        if command is None:
            return f"{shown.where}: {' '.join(names)!r} is not a divscope command"
        context = typer.Context(command, info_name=names[-1], parent=context)
    name = " ".join(names)
    options = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    # A synopsis writes `[--top-p 0.7]`; a command may write `--flag=value`.
    flags = {word for arg in args if FLAG.fullmatch(word := arg.strip("[]").split("=")[0])}
    unknown = sorted(flags - options - {"--help"})
    if unknown:
        return f"{shown.where}: {name} has no option {', '.join(unknown)}"
    # Parsed in its group's context, as the app runs it: a `--config` file's shared keys are
    # checked against every command.
    if shown.concrete and not isinstance(command, TyperGroup) and "--help" not in args:
        try:
            command.make_context(names[-1], list(args), parent=context.parent)
        except Exception as error:
            if not hasattr(error, "format_message"):  # not a usage error: a bug of this test
                raise
            return f"{shown.where}: {name} {shlex.join(args)}: {error.format_message()}"
    return None


SHOWN = [
    shown
    for path in DOCUMENTED
    for shown in shown_commands((ROOT / path).read_text(encoding="utf-8"), path)
]


@pytest.mark.parametrize("shown", SHOWN, ids=lambda shown: shown.where)
def test_documented_command_exists_and_its_flags_parse(shown):
    message = problem(shown)
    assert message is None, message


def test_every_docs_page_is_checked():
    assert {"docs/index.md", "docs/commands.md", "docs/recipes.md"} <= set(DOCUMENTED)


def test_the_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_LINES, f"README.md has {lines} lines; the reference belongs in docs/"


@pytest.mark.parametrize("path", ["README.md", "docs/commands.md", "docs/recipes.md"])
def test_docs_show_commands_to_run(path):
    concrete = [s for s in SHOWN if s.where.startswith(f"{path}:") and s.concrete]
    assert len(concrete) >= 8, f"{path}: only {len(concrete)} divscope commands to run found"


@pytest.mark.parametrize(
    "markdown,expected",
    [
        ("```bash\ndivscope score t --base b --rl r --out o\n```", []),
        ("```bash\ndivscope scor t\n```", ["'divscope scor' is not a divscope command"]),
        ("```bash\ndivscope score t --base b --rl r -o o --top-k 3\n```", ["no option --top-k"]),
        ("```bash\ndivscope score t --base b --rl r -o o --batch-tokens x\n```",
         ["Invalid value for '--batch-tokens'"]),
        ("```bash\ndivscope score t --base b --rl r\n```", ["Missing option '--out'"]),
        ("```\ndivscope score T --base B --rl R --out O [--top-p 0.7]\n    [--wrong W]\n```",
         ["no option --wrong"]),
        ("```bash\ntorchrun --nproc-per-node 2 -m divscope score t --base b \\\n    --rl r -o o "
         "--shard 0/2 && divscope analyze o -o s.json > log  # then\n```", []),
        ("```bash\nOMP_NUM_THREADS=1 divscope lab build OUT_DIR --seed 0\n```", []),
        ("```bash\ntimeout 600 divscope lab build OUT_DIR --seeds 0\n```", ["no option --seeds"]),
        ("```bash\npip install -U divscope && pip show divscope\n```", []),
        ("```bash\ndivscope lab bild OUT_DIR\n```", ["'divscope lab bild' is not a divscope"]),
        ("```python\ndivscope score --nope\n```", []),
        ("Any command: `torchrun --nproc-per-node 2 -m divscope ...`.", []),
        ("Run `divscope analyze\n--nope` (or `pip install divscope`).", ["no option --nope"]),
    ],
)  # fmt: skip
def test_problem_finds_what_the_docs_get_wrong(markdown, expected):
    shown = shown_commands(markdown, "doc.md")
    problems = [message for s in shown if (message := problem(s)) is not None]
    assert len(problems) == len(expected), problems
    for message, part in zip(problems, expected, strict=True):
        assert part in message
