"""Preflight: one serving configuration in (SGLang's launch flags and the model's ``config.json``), one screen of
answers out: does it work on this GPU, and if not, what to change (``python -m ddtree_compat preflight``).

* :mod:`.launch`: the flags as the installed SGLang's ``ServerArgs`` reads and resolves them, in a child.
* :mod:`.model`: the model's shape from its ``config.json``, offline.
* :mod:`.plan`: which cells the configuration reaches, at its own shapes, and the variants a suggestion needs.
* :mod:`.verdict`: the cells' outcomes -> one line per concern, and what would work.
* :mod:`.command`: the subcommand.
"""
