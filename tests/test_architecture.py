"""The walls between the package's rooms, held by reading every module's imports (nothing is imported here).

Rooms: retrieval, models, reading (the core a run needs), when_to_retrieve, training, evaluation, web, ops,
cli, and the top-level config, text and service. Only web/ draws a page; the core never reaches up into
training, evaluation, the page, the operations tools or the command line; environment variables are read in
config.py alone; and every module stays small enough to read in one sitting.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "raqa"
MODULES = sorted(PACKAGE.rglob("*.py"))
CORE = ("retrieval", "models", "reading")
UPPER = ("training", "evaluation", "web", "ops", "cli")
MAX_LINES = 350


def room(path: Path) -> str:
    """The sub-package a module lives in, or its own name for a top-level module."""
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def imports(path: Path) -> set[str]:
    """Every module name the file imports, at the top or inside functions."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def raqa_rooms(path: Path) -> set[str]:
    return {name.split(".")[1] for name in imports(path) if name.startswith("raqa.") and name.count(".") >= 1}


def test_the_rooms_exist():
    for name in (*CORE, "when_to_retrieve", *UPPER):
        assert (PACKAGE / name / "__init__.py").is_file(), name
    assert len(MODULES) > 40  # the walk found the package


def test_only_the_web_room_imports_gradio():
    offenders = [
        str(p.relative_to(PACKAGE))
        for p in MODULES
        if room(p) != "web" and any(n == "gradio" or n.startswith("gradio.") for n in imports(p))
    ]
    assert offenders == []


@pytest.mark.parametrize("core", CORE)
def test_the_core_imports_nothing_from_the_rooms_above_it(core):
    offenders = {
        str(p.relative_to(PACKAGE)): sorted(raqa_rooms(p) & {*UPPER, "when_to_retrieve", "service"})
        for p in MODULES
        if room(p) == core
    }
    assert {k: v for k, v in offenders.items() if v} == {}


@pytest.mark.parametrize("lower", ["training", "evaluation", "when_to_retrieve"])
def test_training_and_evaluation_never_reach_into_the_page_the_tools_or_the_cli(lower):
    offenders = {
        str(p.relative_to(PACKAGE)): sorted(raqa_rooms(p) & {"web", "ops", "cli"}) for p in MODULES if room(p) == lower
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def reads_environment(path: Path) -> list[int]:
    """Lines that read a variable: os.environ[...] / .get(...), os.getenv(...), os.environ passed whole."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
            if isinstance(node.value, ast.Name) and node.value.id == "os":
                lines.append(node.lineno)
    return lines


# A new process started to be timed gets this process's environment as it is; nothing is read from it.
PASSES_ENVIRONMENT_ON = {"ops/bench_start.py"}


def test_environment_variables_are_read_only_in_config():
    readers = {
        str(p.relative_to(PACKAGE)): reads_environment(p)
        for p in MODULES
        if p.name != "config.py" and str(p.relative_to(PACKAGE)) not in PASSES_ENVIRONMENT_ON
    }
    assert {k: v for k, v in readers.items() if v} == {}
    app = (PACKAGE.parent / "app.py").read_text()
    assert "os.environ" not in app and "getenv" not in app


def test_no_module_is_over_350_lines():
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in MODULES}
    assert {k: v for k, v in sizes.items() if v > MAX_LINES} == {}


MAX_WEB_FUNCTION_LINES = 80


def test_no_function_in_the_web_room_is_over_80_lines():
    """A page built as one long function hides which tab owns what: each tab lays itself out in its own module."""
    lengths = {
        f"{p.relative_to(PACKAGE)}:{node.name}": node.end_lineno - node.lineno + 1
        for p in MODULES
        if room(p) == "web"
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    assert lengths and {k: v for k, v in lengths.items() if v > MAX_WEB_FUNCTION_LINES} == {}


def test_the_service_is_under_200_lines():
    """The service plans runs; loading, When-to-retrieve planning and the readers' details live in their rooms."""
    assert len((PACKAGE / "service.py").read_text(encoding="utf-8").splitlines()) < 200


def test_main_only_calls_the_cli():
    main = (PACKAGE / "__main__.py").read_text().splitlines()
    assert len(main) <= 15 and "raqa.cli" in "\n".join(main)


def test_the_architecture_check_would_catch_a_breach(tmp_path):
    """The checks above are not vacuous: a core module importing gradio and the page is seen."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os\nimport gradio as gr\n\ndef f():\n    from raqa.web.app import build_demo\n    return os.environ['X']\n"
    )
    assert "gradio" in imports(bad) and {"web"} <= {n.split(".")[1] for n in imports(bad) if n.startswith("raqa.")}
    assert reads_environment(bad) == [6]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(modules: list[Path]) -> dict[str, set[str]]:
    """Each raqa module's raqa modules, from every import in it (at the top, inside functions or for type checks)."""
    known = {module_name(p) for p in modules}
    return {module_name(p): {n for n in imports(p) if n in known} - {module_name(p)} for p in modules}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of a graph: its strongly connected components of more than one module (Tarjan's)."""
    order, low, stack, found, counter = {}, {}, [], [], [0]

    def visit(node: str) -> None:
        order[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        for other in graph.get(node, ()):
            if other not in order:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], order[other])
        if low[node] == order[node]:
            component = []
            while (top := stack.pop()) != node:
                component.append(top)
            component.append(node)
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return found


def test_no_modules_import_each_other():
    """No import circle, not even through a lazy import inside a function: a circle means two modules share one
    idea, which belongs in one of them or in a third that both import."""
    assert circles(import_graph(MODULES)) == []


def test_the_circle_check_would_catch_a_circle():
    graph = {"raqa.a": {"raqa.b"}, "raqa.b": {"raqa.c"}, "raqa.c": {"raqa.a"}, "raqa.d": {"raqa.a"}}
    assert circles(graph) == [["raqa.a", "raqa.b", "raqa.c"]]
