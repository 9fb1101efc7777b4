"""The library's modules import one another one way: no circle, even through an import inside a
function (kept only to defer a heavy library), and the judging path does not load the fitting
code's scikit-learn."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: str = "argen") -> dict[str, set[str]]:
    """Every argen module and the argen modules it imports anywhere (top level or inside a
    function); `from argen.x import y` counts as importing argen.x.y when that is a module."""
    modules = {module_name(p): p for p in (ROOT / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.add(node.module)
                targets |= {f"{node.module}.{a.name}" for a in node.names}
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles (each as the path that closes it), by depth-first search."""
    found, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                found.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                visit(target, [*stack, target])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_no_import_circles_in_the_library():
    graph = import_graph()
    assert "argen.judging.rules" in graph["argen.judging.learned"]
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_the_local_judge_does_not_load_the_fitting_code():
    code = (
        "import sys\n"
        "from argen.judging.local import LocalJudge\n"
        "LocalJudge()\n"
        "assert 'sklearn' not in sys.modules, 'sklearn'\n"
        "assert 'argen.judging.calibration' not in sys.modules\n"
        "assert 'argen.judging.agreement' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
