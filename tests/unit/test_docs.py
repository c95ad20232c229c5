"""Docs generated from code stay in step with it."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_options_doc_is_generated_from_the_option_definitions():
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_options_doc.py"), "--check"], capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    assert "--ddtree-impl" in (ROOT / "docs" / "options.md").read_text()


def test_the_exit_status_table_in_the_docs_is_the_code_s():
    from ddtree_compat.exitcodes import markdown_table

    assert markdown_table() in (ROOT / "docs" / "results.md").read_text()


def test_the_readme_has_two_set_up_commands_and_ci_runs_both():
    import re

    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set up and run", 1)[1].split("\n## ", 1)[0]
    commands = [c for block in re.findall(r"```bash\n(.*?)```", setup, re.S) for c in block.splitlines()
                if "scripts/setup.sh" in c]
    assert commands == ["bash scripts/setup.sh && python -m ddtree_compat sweep",
                        "bash scripts/setup.sh && python -m pytest -n auto"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci  # the test command, as the README writes it
    assert "python -m ddtree_compat sweep" in ci  # and the main job: the kernel cells the test command leaves to it


LIVE_DOCS = ("README.md", "docs/architecture.md", "docs/extending.md", "docs/tiers.md", "docs/installing.md",
             "docs/ddtree-impls.md", "docs/results.md", "docs/e2e.md", "docs/verify-attention.md")
"""The docs that describe the code as it is (device-run records and results keep the commands they ran)."""


def _named_paths(text: str) -> set[str]:
    import re

    text = re.sub(r"group `ddtree_compat\.\w+`", "", text)  # entry-point groups, not modules
    paths = set(re.findall(r"(?<![\w/.-])((?:ddtree_compat|tests|scripts|benchmarks|docs)/[\w./-]*\w)", text))
    modules = set(re.findall(r"(?<![\w.])(ddtree_compat(?:\.\w+)+)", text))
    return paths | {m.replace(".", "/") for m in modules}


def _exists(named: str) -> bool:
    here = ROOT / named
    if here.exists() or here.with_suffix(".py").exists() or (here.parent.with_suffix(".py")).exists():
        return True  # a path, a module, or a module's attribute (ddtree_compat.records.registry)
    if any(here.parent.glob(here.name + ".*")):
        return True  # a stem of several files (docs/results/NAME.{jsonl.gz,md,html})
    return named.startswith("ddtree_compat/kernel_tests") and (ROOT / named.replace("ddtree_compat/kernel_tests",
                                                                                    "tests/kernels")).exists()


ARCH_LISTS = (("docs/tiers.md", "compiled ahead of time, on the CPU, for", "STATIC_ARCHES"),
              ("docs/tiers.md", "Each case also runs with the tile choice SGLang makes for", "TILE_ARCHES"),
              ("docs/verify-attention.md", "under the tile choices SGLang makes for", "TILE_ARCHES"))
"""Sentences of the docs that list the archs a column of the arch table selects: ``(doc, the words before the list,
the name in ddtree_compat.arch)``."""


def test_the_arch_lists_in_the_docs_are_the_arch_table_s():
    """Adding an arch is a row of ``ARCHES``; the docs that list the static targets and the emulated tile choices
    say the same, or this names the sentence to edit."""
    import re

    from ddtree_compat import arch

    for doc, before, name in ARCH_LISTS:
        text = " ".join((ROOT / doc).read_text().split())
        at = text.index(before) + len(before)
        listed = re.match(r"((?:\s*(?:,|and)?\s*sm\d+)+)", text[at:]).group(1)
        assert tuple(re.findall(r"sm\d+", listed)) == getattr(arch, name), (
            f"{doc}: the archs after '{before}' are not ddtree_compat.arch.{name} {getattr(arch, name)}")


def test_the_deployment_shapes_doc_names_every_scale_kernel_and_its_tag():
    """``docs/tiers.md``'s "Deployment shapes" section lists each kernel with scale cells and its case-id tag."""
    from ddtree_compat.families.scale.boundaries import KERNELS
    from ddtree_compat.families.scale.records import TAGS

    text = (ROOT / "docs" / "tiers.md").read_text()
    section = text[text.index("## Deployment shapes"):]
    section = section[:section.index("\n## ", 1)]
    missing = [f"`{k}`" for k in KERNELS if f"`{k}`" not in section] + [f"`{TAGS[k]}-`" for k in KERNELS
                                                                        if f"`{TAGS[k]}-`" not in section]
    assert not missing, f"docs/tiers.md, Deployment shapes: add {', '.join(missing)}"


def test_every_path_and_module_the_docs_name_exists():
    """A doc that names a file, folder or module the code no longer has is a stale map."""
    stale = {doc: sorted(n for n in _named_paths((ROOT / doc).read_text()) if not _exists(n)) for doc in LIVE_DOCS}
    assert not {d: s for d, s in stale.items() if s}, stale


def _top_names(path):
    """The names a module's file defines at its top (functions, classes, assignments, imports), read, not imported."""
    import ast

    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _module_file(dotted: str):
    """The file of a dotted module name of this checkout (``ddtree_compat.kernel_tests`` is ``tests/kernels``)."""
    rel = dotted.replace("ddtree_compat.kernel_tests", "tests.kernels", 1).split(".")
    base = ROOT.joinpath(*rel)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _resolves(dotted: str) -> bool:
    """``pkg.module[.Name[.attr]]``: the longest prefix that is a module of this checkout, and the next name defined
    at its top (a class's attribute past it is not followed)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = _module_file(".".join(parts[:cut]))
        if path is not None:
            return cut == len(parts) or parts[cut] in _top_names(path) or (
                path.name == "__init__.py" and _module_file(".".join(parts[:cut + 1])) is not None)
    return False


def _cited(text: str) -> set[str]:
    """Dotted names a docstring or comment cites: absolute ``ddtree_compat.x.y`` and Sphinx roles (``:mod:`.x```)."""
    import re

    text = re.sub(r"group (?:``)?ddtree_compat\.\w+", "", text)  # entry-point groups, not modules
    absolute = set(re.findall(r"(?<![\w./])(ddtree_compat(?:\.\w+)+)", text))
    roles = set(re.findall(r":(?:mod|func|class|meth|data|attr|exc):`~?([.\w]+)`", text))
    return absolute | roles


def _prose(path) -> str:
    """A module's docstrings (every bare string statement: module, class, function and attribute docstrings) and
    comments, without its code and other string literals."""
    import ast
    import io
    import tokenize

    source = path.read_text()
    docs = [n.value.value for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)]
    comments = [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT]
    return "\n".join(docs + comments)


def test_every_module_a_docstring_or_comment_names_exists():
    """A docstring or comment of the package that cites a module (or a name in one) the code no longer has is a stale
    map: absolute names (``ddtree_compat.backends.sglang_locate``) and Sphinx roles, relative ones (``:mod:`.server```)
    looked up from the citing module up through its packages."""
    import re

    stale = {}
    for path in sorted((ROOT / "ddtree_compat").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        text = _prose(path)
        for name in _cited(text):
            if name.startswith("."):
                bases = module.split(".")
                candidates = [".".join(bases[:i] + [name.lstrip(".")]) for i in range(len(bases), 0, -1)]
            elif name.startswith("ddtree_compat"):
                candidates = [name]
            else:  # a role naming a bare name (:func:`check`): this module's, or another package's (torch): not ours
                candidates = [f"{module}.{name}"] if re.fullmatch(r"\w+", name) else []
                if candidates and not _resolves(candidates[0]):
                    candidates = []  # an outside name (torch, triton): not ours to check
                    continue
            if candidates and not any(_resolves(c) for c in candidates):
                stale.setdefault(str(path.relative_to(ROOT)), []).append(name)
        for folder in re.findall(r"``(\w+)/``", text) if path.name == "__init__.py" else ():  # a package's map
            if not any((base / folder).is_dir() for base in (path.parent, ROOT / "ddtree_compat", ROOT)):
                stale.setdefault(str(path.relative_to(ROOT)), []).append(f"{folder}/")
    assert not stale, stale
