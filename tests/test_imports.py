"""The Python package's layers (docs/architecture.md, "The Python side"), read from the source with
`ast`: which hmb module imports which, at the top of a module or inside a function.

- No import cycle between hmb's modules. An import inside a function is a dependency like any
  other: a cycle kept apart only by one is still a cycle.
- No module imports another's private name (`from .x import _y`) or reads one (`x._y`).
- A layer imports only the layers below it: the package root and hmb.paths, then data, lab, run,
  present, study, and hmb.commands / hmb.cli on top.
- An import inside a function is of a heavy dependency (numpy, pandas, matplotlib, scipy, tqdm,
  or an hmb module that loads one at its top) and says why on its line; hmb.cli's import of
  hmb.commands inside its Ctrl-C guard is the one other.
- `hmb --help` loads none of numpy, pandas, matplotlib or scipy.
"""
from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "hmb"
LAYERS = ["data", "lab", "run", "present", "study"]      # bottom to top; hmb and hmb.paths below, commands on top
HEAVY = {"numpy", "pandas", "matplotlib", "scipy", "tqdm"}
GUARDS = {("hmb.cli", "hmb.commands")}                     # inside main()'s Ctrl-C guard, on purpose


def _modules() -> dict:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports_in_functions(tree) -> set:
    """The ids of the import nodes inside a function, at any depth: one walk of the tree (a walk
    of each function's own subtree walked nested functions again, a second of the collection of
    every test process)."""
    out: set = set()
    todo = [(tree, False)]
    while todo:
        node, inside = todo.pop()
        for child in ast.iter_child_nodes(node):
            if inside and isinstance(child, (ast.Import, ast.ImportFrom)):
                out.add(id(child))
            todo.append((child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))))
    return out


def _imports(module: str, path: Path) -> list[tuple]:
    """(imported hmb module or top-level package, names, line, inside a function, the line's text)."""
    source_text = path.read_text()
    tree = ast.parse(source_text)
    lines = source_text.splitlines()
    inside = _imports_in_functions(tree)
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        text = lines[node.lineno - 1] if hasattr(node, "lineno") else ""
        if isinstance(node, ast.Import):
            for a in node.names:
                out.append((a.name, [], node.lineno, id(node) in inside, text))
        elif isinstance(node, ast.ImportFrom):
            base = here[:len(here) - node.level + 1] if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:
                sub = f"{source}.{a.name}"
                if sub in MODULES:
                    out.append((sub, [], node.lineno, id(node) in inside, text))
                else:
                    out.append((source, [a.name], node.lineno, id(node) in inside, text))
    return out


@functools.cache
def imports() -> dict:
    """Each module's imports (_imports), read when a test first asks: not while pytest collects,
    which every test process does (0.6-1 s of parsing each)."""
    return {m: _imports(m, p) for m, p in MODULES.items()}


def _layer(module: str) -> int:
    if module in ("hmb", "hmb.paths"):
        return 0
    if module in ("hmb.commands", "hmb.cli"):
        return len(LAYERS) + 1
    return LAYERS.index(module.split(".")[1]) + 1


def _edges(top_only: bool = False) -> dict:
    return {m: {t for t, _, _, inside, _ in imps if t in MODULES and t != m and not (top_only and inside)}
            for m, imps in imports().items()}


def cycles(edges: dict) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_planted_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    assert cycles(_edges()) == []


def test_no_private_name_across_modules():
    bad = [f"{m}:{line}: {name} from {source}" for m, imps in imports().items() for source, names, line, _, _ in imps
           for name in names if name.startswith("_") and not name.startswith("__") and source.startswith("hmb")]
    for m, path in MODULES.items():
        aliases = {}
        tree = ast.parse(path.read_text())
        for source, names, _, _, _ in imports()[m]:
            if source in MODULES and not names:
                aliases[source.rsplit(".", 1)[-1]] = source
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    if a.asname:
                        aliases[a.asname] = a.name
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                bad.append(f"{m}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not bad, "\n".join(bad)


def test_a_layer_imports_only_the_layers_below_it():
    bad = [f"{m} ({_layer(m)}) imports {t} ({_layer(t)})" for m, targets in _edges().items() for t in targets
           if _layer(t) > _layer(m) and (m, t) != ("hmb", "hmb.data.tidy")]   # hmb.load: the package's one call
    assert not bad, "\n".join(bad)


def _heavy_modules() -> set:
    """hmb modules that load a heavy dependency when imported (at their top, or through a module
    they import at their top)."""
    top = _edges(top_only=True)
    heavy = {m for m, imps in imports().items()
             if any(t.split(".")[0] in HEAVY and not inside for t, _, _, inside, _ in imps)}
    grew = True
    while grew:
        more = {m for m, targets in top.items() if targets & heavy} - heavy
        heavy |= more
        grew = bool(more)
    return heavy


def test_an_import_inside_a_function_is_a_heavy_one_and_says_why():
    heavy = _heavy_modules()
    bad = []
    for m, imps in imports().items():
        for target, _, line, inside, text in imps:
            if not inside:
                continue
            if not (target.split(".")[0] in HEAVY or target in heavy or (m, target) in GUARDS):
                bad.append(f"{m}:{line}: {text.strip()}  (not a heavy dependency: import it at the top)")
            elif "#" not in text:
                bad.append(f"{m}:{line}: {text.strip()}  (say why it is inside a function)")
    assert not bad, "\n".join(bad)


def test_help_loads_no_heavy_dependency():
    code = ("import sys\nfrom hmb import cli\ntry:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {sorted(HEAVY)!r} if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "[]", p.stdout[-500:]


if __name__ == "__main__":   # python tests/test_imports.py: the graph in numbers
    inside = [(m, line, text.strip()) for m, imps in imports().items() for _, _, line, i, text in imps if i]
    print(f"{len(MODULES)} modules, {sum(len(t) for t in _edges().values())} imports between them, "
          f"cycles: {cycles(_edges()) or 'none'}, imports inside functions: {len({(m, ln) for m, ln, _ in inside})}")
    for m, line, text in sorted(set(inside)):
        print(f"  {m}:{line}: {text}")
