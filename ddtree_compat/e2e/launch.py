"""A server configuration's launch plan, computed once per configuration and read by the cell that judges it and by
the scheduler that starts its server: why it skips, why asking the installed SGLang failed, the attention backend
asked for and the one it runs on, and its arguments.

:func:`launch_plans` computes every configuration's plan in one pass, from what the installed SGLang offers
(:class:`~.probe.Capabilities`), the checkpoints' folders and SGLang's own attention choice for each ``default``
configuration (asked once, for all of them: :func:`.probe.resolve_attention`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .command import server_args, unavailable_reason
from .attention import SGLANG_CHOICE
from .configs import ServerConfig
from .probe import Capabilities, attention_reason


@dataclass(frozen=True)
class LaunchPlan:
    """How one configuration's server is launched here.

    Attributes:
        config: the configuration.
        reason: why it cannot run here, a skip (``""`` when it can): the host, the installed SGLang's flags,
            algorithms and modules, its attention backend (SGLang's choice, for ``default``), or the ``default``
            cell that runs the same server.
        failure: why asking the installed SGLang failed (its probe, or its attention choice): an error of the setup,
            never a skip and never a verdict on the server (``""`` when nothing failed).
        attention: the backend the server runs on: the one asked for, or SGLang's choice for ``default`` (``""``
            where SGLang defers its choice to the server's start, as 0.5.23 does: read from the server's log then).
        args: the server's arguments, ports aside (:func:`.command.server_args`); ``()`` when it cannot run.
        nccl_port: the installed SGLang takes ``--nccl-port`` (the scheduler picks one).
    """

    config: ServerConfig
    reason: str = ""
    failure: str = ""
    attention: str = ""
    args: tuple[str, ...] = ()
    nccl_port: bool = False

    @property
    def asked(self) -> str:
        """The attention backend the configuration asks for: ``default`` (SGLang chooses) or a name."""
        return self.config.attention

    @property
    def runs(self) -> bool:
        """Whether a server is launched for it."""
        return not self.reason and not self.failure


Resolver = Callable[[dict[str, list[str]]], dict[str, dict]]
"""``{config id: args} -> {config id: {"attention_backend": name, ...} | {"error": why}}``
(:func:`.probe.resolve_attention` with the servers' environment)."""


def launch_plans(configs: list[ServerConfig], caps: Capabilities, paths: dict[str, Path], resolve: Resolver,
                 selected: set[str] | None = None) -> dict[str, LaunchPlan]:
    """Every configuration's plan (by id).

    Args:
        configs: the session's configurations (:func:`.configs.plan`).
        caps: what the installed SGLang offers.
        paths: the checkpoints' folders, ``target`` and one per draft name.
        resolve: asks SGLang for its attention choice (once, for every ``default`` configuration that can run).
        selected: the ids of the configurations whose cells this session runs (``None``: every one): an explicit
            backend that SGLang's own choice also picks runs in its ``default`` twin's cell when that one runs.
    """
    if caps.failure:
        return {c.id: LaunchPlan(c, failure=f"probing the installed SGLang failed: {caps.failure}") for c in configs}
    args = {c.id: tuple(server_args(c, caps, paths["target"], paths[c.draft.name] if c.draft else None))
            for c in configs}
    asked = {c.id: list(args[c.id]) for c in configs if c.attention == SGLANG_CHOICE}
    resolved = resolve(asked) if asked and not caps.error else {}
    by_id = {c.id: c for c in configs}
    plans = {}
    for c in configs:
        plan = LaunchPlan(c, reason=unavailable_reason(c, caps), args=args[c.id], nccl_port=caps.has("--nccl-port"),
                          attention=c.attention if c.attention != SGLANG_CHOICE else "")
        if c.attention == SGLANG_CHOICE:
            chosen = resolved.get(c.id, {})
            name = chosen.get("attention_backend") or ""
            plan = _with(plan, attention=name)
            if not plan.reason and chosen.get("error"):
                plan = _with(plan, failure=f"asking the installed SGLang for its attention backend failed: "
                                           f"{chosen['error']}")
            elif not plan.reason and name and attention_reason(name, caps):
                plan = _with(plan, reason=f"SGLang chooses {name} for this configuration here: "
                                          f"{attention_reason(name, caps)}")
        elif not plan.reason and c.attention and c.id != "target":
            why = attention_reason(c.attention, caps)
            twin = f"{c.shape_id}-attn-{SGLANG_CHOICE}"
            if not why and twin in by_id and (selected is None or twin in selected) and \
                    resolved.get(twin, {}).get("attention_backend") == c.attention:
                why = (f"SGLang's own choice here is {c.attention}: the cell {twin} runs this server "
                       "(one launch per backend)")
            plan = _with(plan, reason=why)
        if plan.reason or plan.failure:
            plan = _with(plan, args=())
        plans[c.id] = plan
    return plans


def _with(plan: LaunchPlan, **changes) -> LaunchPlan:
    from dataclasses import replace

    return replace(plan, **changes)
