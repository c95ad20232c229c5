"""Naming the SGLang under test by repository and commit (:mod:`ddtree_compat.e2e.implementation`)."""

import subprocess

import pytest

from ddtree_compat.identity import ENV, from_direct_url, from_env, identify

COMMIT = "433c58ed70cd1dabe5a07a83da12f1513cd599ae"


def test_env_names_a_copied_tree():
    impl = from_env(f"rancy-ddtree-v2 github.com/Rancy-Wang/sglang@{COMMIT} (ddtree-v2)")
    assert (impl.name, impl.repo, impl.commit, impl.branch, impl.source) == (
        "rancy-ddtree-v2", "github.com/Rancy-Wang/sglang", COMMIT, "ddtree-v2", "env")
    assert from_env("my-fork").name == "my-fork" and from_env("my-fork").commit == ""
    assert from_env("  ") is None


def test_pip_vcs_install():
    impl = from_direct_url({"url": "https://github.com/Rancy-Wang/sglang.git",
                            "vcs_info": {"vcs": "git", "commit_id": COMMIT, "requested_revision": "ddtree-v2"}})
    assert (impl.name, impl.repo, impl.branch) == ("sglang-433c58ed", "github.com/Rancy-Wang/sglang", "ddtree-v2")
    assert from_direct_url({"url": "file:///x", "dir_info": {"editable": True}}) is None and from_direct_url(None) is None


def test_git_checkout_comes_first_and_a_release_is_its_version(tmp_path, monkeypatch):
    pytest.importorskip("shutil").which("git") or pytest.skip("git not installed")
    pkg = tmp_path / "python" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    run = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "ddtree-v2")
    run("remote", "add", "origin", "git@github.com:Rancy-Wang/sglang.git")
    run("add", ".")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    env = {ENV: "ignored-name"}
    impl = identify(str(pkg), "0.0.0.dev0", env=env)
    assert impl.source == "git" and impl.repo == "github.com/Rancy-Wang/sglang" and impl.branch == "ddtree-v2"
    assert impl.name == f"sglang-{impl.commit[:8]}" and not impl.dirty
    (pkg / "__init__.py").write_text("x = 1\n")
    assert identify(str(pkg), None, env=env).dirty
    untracked = tmp_path / "site" / "sglang"  # a package inside an unrelated work tree is not that tree
    untracked.mkdir(parents=True)
    assert identify(str(untracked), "0.5.23", env={}).as_json()["label"] == "sglang 0.5.23"
    assert identify(str(untracked), "0.5.23", env={}).name == ""


def test_a_tree_given_by_path_is_not_named_by_another_trees_variable(tmp_path, monkeypatch):
    """DDTREE_E2E_IMPL names the sglang Python imports; a DDTree tree given by path (DDTREE_IMPLS, --backend
    ddtree-impl:PATH) keeps its identity file's or folder's name (a device run's rancy-ddtree-v2 FA3 cells were
    once named sglang-0.5.23, the release the variable named)."""
    from ddtree_compat import impls

    def tree(name):
        pkg = tmp_path / name / "python" / "sglang"
        (pkg / "srt" / "speculative").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "srt" / "speculative" / "ddtree_utils.py").write_text("def build_ddtree_tree():\n    pass\n")
        return pkg
    imported, other = tree("release"), tree("rancy-ddtree-v2")
    monkeypatch.setenv(ENV, "sglang-0.5.23 github.com/sgl-project/sglang@abcdef1 (v0.5.23)")
    monkeypatch.syspath_prepend(str(imported.parent))
    monkeypatch.delitem(__import__("sys").modules, "sglang", raising=False)
    assert impls.describe(imported.parent.parent).name == "sglang-0.5.23"  # the tree the variable names
    assert impls.describe(other.parent.parent).name == "rancy-ddtree-v2"  # was sglang-0.5.23
    (tmp_path / "rancy-ddtree-v2" / "ddtree-impl.json").write_text(
        f'{{"name": "rancy-ddtree-v2", "repo": "https://github.com/Rancy-Wang/sglang", "commit": "{COMMIT}"}}')
    impl = impls.describe(other.parent.parent)
    assert (impl.name, impl.repo, impl.commit) == ("rancy-ddtree-v2", "github.com/Rancy-Wang/sglang", COMMIT)
