"""The walls between the packages and their rooms, held by reading every module's imports (nothing is imported here).

Two packages: raqa/ (what the page and the demo verbs run) and lab/ (training, measurement, benchmarks, deploy). The
lab imports raqa; raqa never imports the lab. raqa's rooms: retrieval, models, reading (the core a run needs),
when_to_retrieve, evaluation (the question sets, metrics and records the page shows), web, cli, and the top-level
config, text, batch and service; lab's: training, evaluation, ops, cli. Only raqa/web/ draws a page; the core never
reaches up into the page or the command line; environment variables are read in config.py alone; and every module
stays small enough to read in one sitting.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "raqa"
LAB = ROOT / "lab"
RAQA_MODULES = sorted(PACKAGE.rglob("*.py"))
LAB_MODULES = sorted(LAB.rglob("*.py"))
MODULES = RAQA_MODULES + LAB_MODULES
CORE = ("retrieval", "models", "reading")
UPPER = ("evaluation", "web", "cli")
LAB_ROOMS = ("training", "evaluation", "ops", "cli")
MAX_LINES = 350


def where(path: Path) -> str:
    """The module's path from the repository root (raqa/... or lab/...)."""
    return str(path.relative_to(ROOT))


def room(path: Path) -> str:
    """The package and sub-package a module lives in ("raqa/web", "lab/ops"), or the package and its own name for a
    top-level module ("raqa/service")."""
    parts = path.relative_to(ROOT).parts
    return f"{parts[0]}/{parts[1].removesuffix('.py')}"


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
    for name in LAB_ROOMS:
        assert (LAB / name / "__init__.py").is_file(), name
    assert len(RAQA_MODULES) > 40 and len(LAB_MODULES) > 40  # the walk found both packages


def test_raqa_never_imports_the_lab():
    """The wall between the two packages: what the page runs stands without the lab (a Space ships raqa/ alone)."""
    offenders = {where(p): sorted(n for n in imports(p) if n == "lab" or n.startswith("lab.")) for p in RAQA_MODULES}
    app = imports(ROOT / "app.py")
    assert {k: v for k, v in offenders.items() if v} == {} and not any(n.startswith("lab") for n in app)


def test_only_the_web_room_imports_gradio():
    offenders = [
        where(p)
        for p in MODULES
        if room(p) != "raqa/web" and any(n == "gradio" or n.startswith("gradio.") for n in imports(p))
    ]
    assert offenders == []


@pytest.mark.parametrize("core", CORE)
def test_the_core_imports_nothing_from_the_rooms_above_it(core):
    offenders = {
        where(p): sorted(raqa_rooms(p) & {*UPPER, "when_to_retrieve", "service"})
        for p in RAQA_MODULES
        if room(p) == f"raqa/{core}"
    }
    assert {k: v for k, v in offenders.items() if v} == {}


@pytest.mark.parametrize("lower", ["raqa/evaluation", "raqa/when_to_retrieve", "lab/training", "lab/evaluation"])
def test_training_and_evaluation_never_reach_into_the_page_the_tools_or_the_cli(lower):
    offenders = {
        where(p): sorted(
            n
            for n in imports(p)
            if n.split(".")[:2] in (["raqa", "web"], ["raqa", "cli"], ["lab", "ops"], ["lab", "cli"])
        )
        for p in MODULES
        if room(p) == lower
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
PASSES_ENVIRONMENT_ON = {"lab/ops/bench_start.py"}


def test_environment_variables_are_read_only_in_config():
    readers = {
        where(p): reads_environment(p)
        for p in MODULES
        if where(p) != "raqa/config.py" and where(p) not in PASSES_ENVIRONMENT_ON
    }
    assert {k: v for k, v in readers.items() if v} == {}
    app = (PACKAGE.parent / "app.py").read_text()
    assert "os.environ" not in app and "getenv" not in app


def test_no_module_is_over_350_lines():
    sizes = {where(p): len(p.read_text().splitlines()) for p in MODULES}
    assert {k: v for k, v in sizes.items() if v > MAX_LINES} == {}


MAX_WEB_FUNCTION_LINES = 80


def test_no_function_in_the_web_room_is_over_80_lines():
    """A page built as one long function hides which tab owns what: each tab lays itself out in its own module."""
    lengths = {
        f"{where(p)}:{node.name}": node.end_lineno - node.lineno + 1
        for p in RAQA_MODULES
        if room(p) == "raqa/web"
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    assert lengths and {k: v for k, v in lengths.items() if v > MAX_WEB_FUNCTION_LINES} == {}


MAX_COMMAND_LINES = 15


def command_lengths(modules) -> dict[str, int]:
    """Each command function's (cmd_*) body lines, its docstring left out."""
    lengths = {}
    for p in modules:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("cmd_"):
                body = node.body[1:] if ast.get_docstring(node) else node.body
                lengths[f"{'/'.join(p.parts[-3:])}:{node.name}"] = node.end_lineno - body[0].lineno + 1
    return lengths


def test_every_command_function_is_at_most_15_lines():
    """A command parses nothing and computes nothing itself: it checks, loads, runs and prints through named helpers."""
    lengths = command_lengths([p for p in MODULES if p.parent.name == "cli"])
    assert len(lengths) > 20 and {k: v for k, v in lengths.items() if v > MAX_COMMAND_LINES} == {}


def test_the_command_length_check_would_catch_a_long_command(tmp_path):
    long = tmp_path / "cli" / "long.py"
    long.parent.mkdir()
    long.write_text('def cmd_long(args):\n    """Doc."""\n' + "    x = 1\n" * 16 + "    return x\n")
    assert list(command_lengths([long]).values()) == [17]


def test_the_service_is_under_200_lines():
    """The service plans runs; loading, When-to-retrieve planning and the readers' details live in their rooms."""
    assert len((PACKAGE / "service.py").read_text(encoding="utf-8").splitlines()) < 200


@pytest.mark.parametrize("package", [PACKAGE, LAB])
def test_main_only_calls_the_cli(package):
    main = (package / "__main__.py").read_text().splitlines()
    assert len(main) <= 15 and f"{package.name}.cli" in "\n".join(main)


def test_the_architecture_check_would_catch_a_breach(tmp_path):
    """The checks above are not vacuous: a core module importing gradio and the page is seen."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os\nimport gradio as gr\n\ndef f():\n    from raqa.web.app import build_demo\n    return os.environ['X']\n"
    )
    assert "gradio" in imports(bad) and {"web"} <= {n.split(".")[1] for n in imports(bad) if n.startswith("raqa.")}
    assert reads_environment(bad) == [6]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(modules: list[Path]) -> dict[str, set[str]]:
    """Each module's modules of raqa and lab, from every import in it (at the top, inside functions or for type checks)."""
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


# Names every package's entry points share by design: a module's `main` (its `python -m`) and each package's CLI parser.
ENTRY_POINT_NAMES = {"main", "build_parser"}


def _per_module_convention(node: ast.AST) -> bool:
    """A module's own logger or a type variable: the same name in every module means the same thing."""
    if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
        return False
    called = ast.unparse(node.value.func)
    return called in {"logging.getLogger", "TypeVar", "typing.TypeVar"}


def public_names(path: Path) -> set[str]:
    """The public names a module defines at its top level: functions, classes and assigned constants."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign) and not _per_module_convention(node):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_") and n not in ENTRY_POINT_NAMES}


def defined_twice(modules: list[Path], root: Path = ROOT) -> dict[str, list[str]]:
    where_defined: dict[str, list[str]] = {}
    for path in modules:
        for name in public_names(path):
            where_defined.setdefault(name, []).append(str(path.relative_to(root)))
    return {name: paths for name, paths in sorted(where_defined.items()) if len(paths) > 1}


def test_no_public_name_is_defined_in_two_modules():
    """One meaning per public name across raqa/, lab/ and app.py: a constant is imported, not retyped, and two
    functions that do different things have different names (`grep` finds the one meant)."""
    assert defined_twice([*MODULES, ROOT / "app.py"]) == {}


def test_the_name_check_would_catch_a_name_defined_twice(tmp_path):
    for folder, text in (
        ("a", "K = 15\nLOG = logging.getLogger(__name__)\n"),
        ("b", "def K():\n    pass\nLOG = logging.getLogger(__name__)\n"),
    ):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "m.py").write_text("import logging\n" + text)
    modules = [tmp_path / "a" / "m.py", tmp_path / "b" / "m.py"]
    assert defined_twice(modules, tmp_path) == {"K": ["a/m.py", "b/m.py"]}  # each module's own logger is no clash


MAX_POSITIONAL = 3  # in a call of more than five arguments; the rest say which field they fill


def long_positional_calls(path: Path, root: Path = ROOT) -> list[str]:
    """Calls of more than five arguments passing more than three positionally, where a reader must count to know
    which value is which field. A call listing names (`stated(args, "limit", "seed", ...)`) is a list, not fields."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or len(node.args) + len(node.keywords) <= 5:
            continue
        listed = all(isinstance(a, ast.Starred) or isinstance(getattr(a, "value", None), str) for a in node.args[1:])
        if len(node.args) > MAX_POSITIONAL and not listed:
            found.append(f"{path.relative_to(root)}:{node.lineno} {ast.unparse(node.func)}")
    return found


def test_calls_of_more_than_five_arguments_name_them():
    """engine.py once built a WindowVerdict from ten positional values; now every such call says what it fills."""
    assert [call for p in [*MODULES, ROOT / "app.py"] for call in long_positional_calls(p)] == []


def test_the_call_check_would_catch_positional_fields(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('f(1, 2, 3, 4, 5, 6)\nf(1, 2, 3, d=4, e=5, g=6)\nstated(args, "a", "b", "c", "d", "e")\n')
    assert long_positional_calls(module, tmp_path) == ["m.py:1 f"]
