"""The package's layering, read from its source: what each part may import, and where the token
statistics are implemented.

Every module under `divscope/` is parsed with `ast`, so a module added later is checked too.
An import counts wherever it stands: at module level, inside a function (a lazy import still
loads the package when the function runs) and under `if TYPE_CHECKING:` (the module's API still
depends on it). A string that names a divscope module, as lazy exports and grader targets do
(`"divscope.lab.task:verify"`), counts as an import of that module: it is imported by name.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import divscope

PACKAGE = Path(divscope.__file__).parent
METRICS = "divscope.scoring.metrics"
# A whole string that names a divscope module, optionally with `:function`.
MODULE_STRING = re.compile(r"^(divscope(?:\.\w+)+)(?::\w+)?$")


def module_name(path: Path) -> str:
    """`divscope/analyses/shift.py` -> `divscope.analyses.shift` (a package is its `__init__`)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, tuple[Path, ast.Module]]:
    """Every module of the package: name -> (path, parsed source)."""
    return {
        module_name(path): (path, ast.parse(path.read_text(encoding="utf-8"), str(path)))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


MODULES = package_modules()


def imported_names(module: str, tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of everything `module` imports, anywhere in its source.

    `from a.b import c` yields `a.b` and `a.b.c` (c may be a submodule); relative imports are
    resolved against `module`'s package.
    """
    is_package = MODULES.get(module, (Path("__init__.py"),))[0].name == "__init__.py"
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            yield node.lineno, base
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{base}.{alias.name}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = MODULE_STRING.match(node.value)
            if match:
                yield node.lineno, match.group(1)


def within(name: str, prefix: str) -> bool:
    """Whether the dotted `name` is `prefix` or lies below it."""
    return name == prefix or name.startswith(prefix + ".")


@dataclass(frozen=True)
class ImportRule:
    """Modules that `applies` to must not import anything within `forbidden`."""

    rule: str
    applies: Callable[[str], bool]
    forbidden: tuple[str, ...]


IMPORT_RULES = (
    ImportRule(
        "analyses/ are pure polars: they import no torch, transformers or matplotlib",
        lambda m: within(m, "divscope.analyses"),
        ("torch", "transformers", "matplotlib"),
    ),
    ImportRule(
        "figures/ only draw analyses: they import no scoring, decoding, generation or torch",
        lambda m: within(m, "divscope.figures"),
        ("divscope.scoring", "divscope.decoding", "divscope.generation", "torch"),
    ),
    ImportRule(
        "estimators are the ground floor: they import no divscope module but errors and defaults",
        lambda m: m == "divscope.estimators",
        tuple(
            sorted(
                {".".join(m.split(".")[:2]) for m in MODULES if m != "divscope"}
                - {"divscope.estimators", "divscope.errors", "divscope.defaults"}
            )
        ),
    ),
    ImportRule(
        "grading sits below the analyses: it imports no analyses (estimators are shared)",
        lambda m: within(m, "divscope.grading"),
        ("divscope.analyses",),
    ),
    ImportRule(
        "analyses compute, formatting prints them: analyses import no formatting",
        lambda m: within(m, "divscope.analyses"),
        ("divscope.formatting",),
    ),
    ImportRule(
        "the report sits beside plot, not above it: reporting imports the gallery, never plot",
        lambda m: within(m, "divscope.reporting"),
        ("divscope.figures.plot",),
    ),
    ImportRule(
        "only the CLI and the grader registry use the lab (and the lab its own modules)",
        lambda m: (
            not any(
                within(m, allowed)
                for allowed in ("divscope.cli", "divscope.grading.registry", "divscope.lab")
            )
        ),
        ("divscope.lab",),
    ),
)


def import_violations(rule: ImportRule) -> list[str]:
    """`path:line: ...` for each import in the package that breaks `rule`."""
    return [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {module} imports {name!r}; rule: {rule.rule}"
        for module, (path, tree) in MODULES.items()
        if rule.applies(module)
        for line, name in imported_names(module, tree)
        if any(within(name, forbidden) for forbidden in rule.forbidden)
    ]


@pytest.mark.parametrize("rule", IMPORT_RULES, ids=lambda rule: rule.rule.split(":")[0])
def test_import_rules(rule):
    assert any(rule.applies(m) for m in MODULES), f"no module left under: {rule.rule}"
    violations = import_violations(rule)
    assert not violations, "\n".join(violations)


# The floors of the package, bottom to top. A module may import its own floor and the floors
# below; an import that runs upward breaks the layering. A module's floor is that of the longest
# prefix listed here, so that `divscope.lab.task` (the lab's verifier, which grading names)
# sits below the rest of the lab. Listed modules that do not exist are not an error: the table
# names the rooms, whichever branch has built them.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "ground",
        (
            "divscope._lazy", "divscope.errors", "divscope.defaults", "divscope.schema",
            "divscope.estimators", "divscope.answers", "divscope.io", "divscope.output",
            "divscope.prompts", "divscope.progress", "divscope.vocab", "divscope.oom",
            "divscope.memory_plan", "divscope.distributed", "divscope.testing", "divscope.params",
            "divscope.tables", "divscope.study_file",
        ),
    ),
    (
        "engines",
        (
            "divscope.models", "divscope.scoring", "divscope.generation", "divscope.decoding",
            "divscope.grading", "divscope.lab.task", "divscope.readers",
        ),
    ),
    ("analyses", ("divscope.analyses",)),
    ("monitor", ("divscope.monitor",)),
    ("lab", ("divscope.lab",)),
    ("formatting", ("divscope.formatting",)),
    ("figures", ("divscope.figures",)),
    ("reporting", ("divscope.reporting",)),
    ("lab_study", ("divscope.lab_study",)),
    ("cli", ("divscope.cli", "divscope.__main__")),
)  # fmt: skip
# The package root is the facade: it names every command for lazy loading (`_EXPORTS`) and
# holds `__version__`, which any floor may read. Its own imports are not checked.
FACADE = "divscope"


def floor(module: str, layers=LAYERS) -> int | None:
    """The index in `layers` of `module`'s floor, by its longest listed prefix (None if none)."""
    matches = [
        (len(prefix), index)
        for index, (_, prefixes) in enumerate(layers)
        for prefix in prefixes
        if within(module, prefix)
    ]
    return max(matches)[1] if matches else None


def import_graph(modules=None) -> dict[str, dict[str, int]]:
    """module -> {divscope module it imports: first line}, each name resolved to the longest
    existing module it lies within (`divscope.io.read_table` -> `divscope.io`)."""
    modules = MODULES if modules is None else modules
    graph: dict[str, dict[str, int]] = {}
    for module, (_, tree) in modules.items():
        edges = graph.setdefault(module, {})
        for line, name in imported_names(module, tree):
            target = max((m for m in modules if within(name, m)), key=len, default=None)
            if target not in (None, module, FACADE):
                edges.setdefault(target, line)
    return graph


def upward_imports(modules=None, layers=LAYERS) -> list[str]:
    """`path:line: ...` for each import that runs to a higher floor (and each module with none)."""
    modules = MODULES if modules is None else modules
    found = []
    for module, edges in import_graph(modules).items():
        if module == FACADE:
            continue
        where = modules[module][0].relative_to(PACKAGE.parent)
        own = floor(module, layers)
        if own is None:
            found.append(f"{where}: {module} has no floor in tests/test_architecture.py LAYERS")
            continue
        for target, line in edges.items():
            above = floor(target, layers)
            if above is not None and above > own:
                found.append(
                    f"{where}:{line}: {module} ({layers[own][0]}) imports {target} "
                    f"({layers[above][0]}), a floor above"
                )
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of `graph`: its strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in graph.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def room(module: str) -> str:
    """The room a module belongs to: its longest prefix in LAYERS (`divscope.decoding.lockstep`
    -> `divscope.decoding`, `divscope.lab.task` -> itself), else its top-level name."""
    listed = [p for _, prefixes in LAYERS for p in prefixes if within(module, p)]
    return max(listed, key=len) if listed else ".".join(module.split(".")[:2])


def import_cycles(modules=None) -> list[str]:
    """Each cycle of imports between modules, and between rooms (`decoding` <-> `generation`).
    A cycle that crosses floors also has an upward import; it is reported by both tests.

    A package's `__init__` re-exporting its own modules is not a cycle with them: edges from a
    package to the modules below it are left out of the module graph.
    """
    graph = import_graph(modules)
    between_modules = {
        module: {t for t in edges if not within(t, module)} for module, edges in graph.items()
    }
    between_rooms: dict[str, set[str]] = {}
    for module, edges in graph.items():
        between_rooms.setdefault(room(module), set()).update(
            room(t) for t in edges if room(t) != room(module)
        )
    return [
        f"import cycle between {kind}: {' <-> '.join(cycle)}"
        for kind, g in (("modules", between_modules), ("rooms", between_rooms))
        for cycle in strongly_connected(g)
    ]


def test_floors_and_cycles_are_found():
    assert LAYERS[floor("divscope.lab.task")][0] == "engines"  # the longest prefix decides
    assert LAYERS[floor("divscope.lab.family")][0] == "lab"
    assert floor("divscope.elsewhere") is None
    assert strongly_connected({"a": {"b"}, "b": {"a", "c"}, "c": set()}) == [["a", "b"]]
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_runs_upward():
    violations = upward_imports()
    assert not violations, "\n".join(violations)


def test_no_import_cycles():
    cycles = import_cycles()
    assert not cycles, "\n".join(cycles)


# A definition whose name says it computes top-p truncation, JS, KL (JS is built from it), CE
# or entropy: one of these words between underscores (or at either end) of its snake_case name.
# `divergence` alone is not one: every analysis of this package is about divergence.
METRIC_NAME = re.compile(
    r"(?:^|_)(?:top_?p|nucleus|truncat(?:e|ed|ion)|js|jsd|jensen|shannon|kl|kld|kullback"
    r"|leibler|ce|cross_?entropy|entrop(?:y|ies))(?:_|$)"
)

# Definitions outside scoring/metrics.py whose names mention a metric but implement none.
# Module -> qualified name -> why it is allowed.
NAMES_THAT_ONLY_MENTION_A_METRIC: dict[str, dict[str, str]] = {
    "divscope.analyses.shift": {
        "entropy_groups": "the low/high divergence groups of the entropy analyses",
        "entropy_by_divergence": "summarizes the scored entropy columns per divergence group",
        "EntropyDensity": "the result of entropy_density",
        "entropy_density": "KDEs of the scored entropy columns",
        "entropy_iou": "overlap of the top divergent positions with the top entropy_base ones",
    },
    "divscope.decoding.policies": {
        "EntropyGated": "a takeover policy gated on the step's entropy (StepView.entropy_and_ce)",
    },
    "divscope.figures.shift": {
        "entropy_by_divergence": "draws analyses.entropy_by_divergence and entropy_density",
        "compare_entropy": "draws entropy_by_divergence's high panel for several tables",
    },
}

# Cached views of the decoder's step that call the scoring functions: delegation, checked
# below to call a function imported from scoring/metrics.py.
DELEGATES_TO_METRICS: dict[str, dict[str, str]] = {
    "divscope.decoding.policies": {
        "StepView.truncated": "caches metrics.truncate per model and config",
        "StepView.truncate_together": "calls metrics.truncate once on both models' rows",
        "StepView.js": "caches metrics.truncated_js of the step",
        "StepView.entropy_and_ce": "caches metrics.entropy_and_cross_entropy of the step",
    },
}


def snake_case(name: str) -> str:
    """`EntropyDensity` -> `entropy_density`, `TopPFilter` -> `top_p_filter`; a snake_case
    name is returned lowercased."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def definitions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    """(qualified name, node) of every function, method and class, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            qualname = f"{prefix}{node.name}"
            yield qualname, node
            yield from definitions(node, f"{qualname}.")
        else:
            yield from definitions(node, prefix)


def metrics_names(tree: ast.Module) -> set[str]:
    """Local names a module binds to objects of scoring/metrics.py."""
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == METRICS
        for alias in node.names
    }


def calls_metrics(node: ast.AST, names: set[str]) -> bool:
    """Whether `node`'s body calls a function imported from scoring/metrics.py."""
    return any(
        isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in names
        for call in ast.walk(node)
    )


def metric_violations() -> list[str]:
    """`path:line: ...` for each definition outside scoring/metrics.py named like a metric."""
    rule = "top-p, JS, KL, CE and entropy are implemented only in divscope/scoring/metrics.py"
    found = []
    for module, (path, tree) in MODULES.items():
        if module == METRICS:
            continue
        where = path.relative_to(PACKAGE.parent)
        allowed = NAMES_THAT_ONLY_MENTION_A_METRIC.get(module, {})
        delegates = DELEGATES_TO_METRICS.get(module, {})
        for qualname, node in definitions(tree):
            name = snake_case(qualname.rsplit(".", 1)[-1]).lstrip("_")
            if not METRIC_NAME.search(name) or qualname in allowed:
                continue
            if qualname in delegates and calls_metrics(node, metrics_names(tree)):
                continue
            found.append(
                f"{where}:{node.lineno}: {module} defines {qualname!r}, named like a metric "
                f"implementation; rule: {rule} (move it there, or if it only delegates to "
                "metrics.py or only mentions a metric, allow it in tests/test_architecture.py "
                "with the reason)"
            )
    return found


def test_metrics_are_implemented_only_in_scoring_metrics():
    violations = metric_violations()
    assert not violations, "\n".join(violations)


def test_every_allowed_name_still_exists():
    # A stale entry would let a future definition of that name through unchecked.
    for allowlist in (NAMES_THAT_ONLY_MENTION_A_METRIC, DELEGATES_TO_METRICS):
        for module, names in allowlist.items():
            defined = {qualname for qualname, _ in definitions(MODULES[module][1])}
            assert set(names) <= defined, (module, sorted(set(names) - defined))
            assert all(
                METRIC_NAME.search(snake_case(n.rsplit(".", 1)[-1]).lstrip("_")) for n in names
            ), (module, "an allowed name that no longer looks like a metric needs no entry")


def test_the_metrics_module_defines_the_metrics():
    defined = {snake_case(q) for q, _ in definitions(MODULES[METRICS][1])}
    assert {"truncate", "truncated_js", "entropy_and_cross_entropy"} <= defined


@pytest.mark.parametrize(
    "source,expected",
    [
        ("import torch.nn as nn", {"torch.nn"}),
        ("from torch import Tensor", {"torch", "torch.Tensor"}),
        ("def f():\n    import matplotlib.pyplot", {"matplotlib.pyplot"}),
        ("if TYPE_CHECKING:\n    from transformers import X", {"transformers", "transformers.X"}),
        ("from divscope import lab", {"divscope", "divscope.lab"}),
        ("from ..lab import task", {"divscope.lab", "divscope.lab.task"}),
        ("from . import stats", {"divscope.analyses", "divscope.analyses.stats"}),
        ("TARGET = 'divscope.lab.task:verify'", {"divscope.lab.task"}),
        ("NOTE = 'see divscope.lab for the models'", set()),
    ],
)
def test_imports_are_found_wherever_they_stand(source, expected):
    found = {name for _, name in imported_names("divscope.analyses.shift", ast.parse(source))}
    assert found == expected


@pytest.mark.parametrize(
    "name,implementation",
    [
        ("top_p_nucleus", True), ("truncated_js", True), ("kl_divergence", True),
        ("jensen_shannon", True), ("cross_entropy", True), ("entropy_and_ce", True),
        ("_log_entropy", True), ("TopPFilter", True), ("topp", True),
        ("high_divergence_sample", False), ("divergence_histogram", False), ("since", False),
        ("price_table", False), ("jsonl_rows", False), ("klass", False),
    ],
)  # fmt: skip
def test_metric_names_are_recognized(name, implementation):
    assert bool(METRIC_NAME.search(snake_case(name).lstrip("_"))) is implementation
