"""End-to-end tier (``e2e``): a real SGLang server per speculative configuration, with known acceptance.

The kernel tiers call SGLang's verify and commit kernels directly; this tier runs them the way the field
report saw them fail: ``python -m sglang.launch_server`` with a target and a draft, greedy ``/generate``
requests, and the acceptance the server reports. Every number it reads is predicted in advance:

* :mod:`.checkpoints` writes tiny checkpoints (config.json + safetensors, never downloaded) whose greedy
  output is the successor of the last token, and drafts that agree with it always, never, or except on a
  known residue class of tokens (:class:`.checkpoints.Agreement`).
* :mod:`.dflash` builds the DFlash draft (DFLASH's and DDTREE's) whose block agrees with the target at every
  depth, never, or on a known fraction: each mask row reads the context 65 positions back through RoPE.
* :mod:`.forward` is a pure-PyTorch forward of those checkpoints (the proof, run in CI, that the greedy
  functions hold, in bfloat16 as the server runs them).
* :mod:`.expect` turns a configuration (chain depth, agreement) and a request into the exact accept
  lengths, verify rounds, accepted drafts and output tokens SGLang must report.
* :mod:`.configs` holds the server configurations and request phases of each profile; :mod:`.attention` the
  attention backends they are served on (one encoding: ``default`` is SGLang's own choice).
* One module per role of a server: :mod:`.probe` asks the installed SGLang what it offers (in a child);
  :mod:`.command` builds the server's command line; :mod:`.ports` picks its ports; :mod:`.process` starts,
  watches and stops it (own process group, readiness deadline, never left behind), :mod:`.standby` before its
  arguments are known; :mod:`ddtree_compat.identity` names the SGLang under test by repository and commit.
* :mod:`.launch`: each configuration's launch plan, computed once (why it skips, the backend asked and resolved,
  the arguments); :mod:`.scheduler`: which server starts when, and each server's background driver;
  :mod:`.baseline`: the lossless baseline; :mod:`.timeline`: where the time goes; :mod:`.session`: one pytest
  session's e2e tier and its cell runner.
* :mod:`.logparse` reads the server log (``Decode batch`` lines, faults), ``/metrics`` and ``/server_info``.
* :mod:`.runner` runs one phase against a server and saves what it saw (captures) for the parsing fixtures;
  :mod:`.judge` judges it with small named rules (:class:`ddtree_compat.outcomes.Verdict`); :mod:`.table` renders
  the DDTree sweep, one column per implementation.

How to run it, what skips and why: ``docs/e2e.md``.
"""
