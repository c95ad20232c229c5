"""End-to-end tier (``e2e``): a real SGLang server per speculative configuration, with known acceptance.

The kernel tiers call SGLang's verify and commit kernels directly; this tier runs them the way the field
report saw them fail: ``python -m sglang.launch_server`` with a target and a draft, greedy ``/generate``
requests, and the acceptance the server reports. Every number it reads is predicted in advance:

* :mod:`.checkpoints` writes tiny checkpoints (config.json + safetensors, never downloaded) whose greedy
  output is the successor of the last token, and drafts that agree with it always, never, or except on a
  known residue class of tokens (:class:`.checkpoints.Agreement`).
* :mod:`.dflash` builds the DFlash draft (DFLASH's and DDTREE's) whose block agrees with the target at every
  depth, never, or on a known fraction: each mask row reads the context 65 positions back through RoPE.
* :mod:`.reference` is a pure-PyTorch forward of those checkpoints (the proof, run in CI, that the greedy
  functions hold, in bfloat16 as the server runs them).
* :mod:`.expect` turns a configuration (chain depth, agreement) and a request into the exact accept
  lengths, verify rounds, accepted drafts and output tokens SGLang must report.
* :mod:`.configs` holds the server configurations and request phases of each profile.
* :mod:`.server` launches, probes and stops servers (own process group, free port, readiness deadline);
  :mod:`ddtree_compat.identity` names the SGLang under test by repository and commit.
* :mod:`.logparse` reads the server log (``Decode batch`` lines, faults), ``/metrics`` and ``/server_info``.
* :mod:`.runner` runs one phase against a server, judges it (:class:`ddtree_compat.outcomes.Verdict`) and
  saves what it saw (captures) for the parsing fixtures; :mod:`.table` renders the DDTree sweep, one column
  per implementation.

How to run it, what skips and why: ``docs/e2e.md``.
"""
