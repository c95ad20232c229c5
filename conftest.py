"""Repo-level pytest configuration. The suite's own plugin (``ddtree_compat.plugin``) is loaded through
its ``pytest11`` entry point once the package is installed (``pip install -e .``); here we only add
pytester, which the suite's tests of its own machinery use to run real pytest sessions."""

pytest_plugins = ("pytester",)
