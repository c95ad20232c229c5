"""Read what a live SGLang server reports: its log, ``/metrics`` and ``/server_info``.

* ``Decode batch`` lines (``scheduler_components/metrics_reporter.py``, one per decode batch with
  ``--decode-log-interval 1``): ``#running-req: N``, ``accept len: X.XX``, ``accept rate: Y.YY``,
  ``cuda graph: True|False``, ``gen throughput (token/s): Z``. Older versions wrote ``Decode batch.``.
  ``accept len`` is accepted drafts + 1 averaged over the batch's requests: 1.00 means nothing accepted.
* Fault lines: CUDA errors (illegal instruction / memory access, misaligned address, device-side assert),
  ``Traceback``, ``Scheduler hit an exception``, a Rust panic (the radix-tree extension's, seen on the
  lent H200) and the like (:data:`FAULT_PATTERNS`), classified with
  :func:`ddtree_compat.faults.classify` like the kernel tiers' faults.
* A child that failed (:func:`child_failure`, what the harness polls while it waits on a server): a Python
  traceback whose header opens a line (after SGLang's ``[timestamp TP0] `` prefix and an optional ``Scheduler
  hit an exception: ``) and is followed by a frame line, read to its last frame and exception line
  (:func:`raised_traceback`); or SGLang's SIGQUIT line (:func:`sigquit_line`).
* ``/metrics`` (Prometheus text, ``--enable-metrics``): parsed with ``prometheus_client``; each sample
  name's values summed over its label sets.
* ``/server_info``: ``internal_states[0].avg_spec_accept_length`` (older: ``/get_server_info``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..faults import classify

FAULT_PATTERNS: tuple[str, ...] = (
    "Scheduler hit an exception",
    "Traceback",
    "CUDA error",
    "illegal instruction",
    "illegal memory access",
    "misaligned address",
    "device-side assert",
    "unspecified launch failure",
    "CUDA out of memory",
    "Segmentation fault",
    "core dumped",
    "watchdog timeout",
    "panicked at",
)
"""Substrings (case-insensitive) that make a log line a fault line."""

BENIGN_PATTERNS: tuple[str, ...] = (
    "Can not initialize OpenAIServingResponses",
)
"""Fault lines known to be harmless (substrings), each with the captured log that shows it, in a fixture:

* ``Can not initialize OpenAIServingResponses, error: Traceback ...`` ending in ``No module named
  'openai_harmony'``: the DDTree trees of June 2026 (dbguo-ddtree-dev 514ea1f3, rancy-ddtree 398fc2c7) log the
  optional Responses API's import failure as a traceback at start, then serve
  (``tests/e2e/fixtures/captures/h200-ddtree-older/``)."""

_DECODE = re.compile(r"Decode batch\b")
_FIELDS = {
    "running": re.compile(r"#running-req: (\d+)"),
    "accept_len": re.compile(r"accept len: ([0-9]+(?:\.[0-9]+)?)"),
    "accept_rate": re.compile(r"accept rate: ([0-9]+(?:\.[0-9]+)?)"),
    "cuda_graph": re.compile(r"\b(?:cuda|cpu|npu|musa) graph: (True|False)"),
    "gen_throughput": re.compile(r"gen throughput \(token/s\): ([0-9]+(?:\.[0-9]+)?)"),
}


@dataclass(frozen=True)
class DecodeLine:
    """One ``Decode batch`` log line; a field is ``None`` when the line does not carry it.

    Attributes:
        line_no: 0-based line number in the text parsed.
        running: ``#running-req`` (the batch size the accept length averages over).
        accept_len: ``accept len`` (speculative servers only).
        accept_rate: ``accept rate``.
        cuda_graph: whether the batch ran as a CUDA graph replay.
        gen_throughput: ``gen throughput (token/s)`` since the previous line.
        text: the line.
    """

    line_no: int
    running: int | None
    accept_len: float | None
    accept_rate: float | None
    cuda_graph: bool | None
    gen_throughput: float | None
    text: str


def parse_decode_line(line: str, line_no: int = 0) -> DecodeLine | None:
    """The fields of a ``Decode batch`` line, or ``None`` for any other line."""
    if not _DECODE.search(line):
        return None
    got = {k: (m.group(1) if (m := rx.search(line)) else None) for k, rx in _FIELDS.items()}
    return DecodeLine(
        line_no,
        int(got["running"]) if got["running"] else None,
        float(got["accept_len"]) if got["accept_len"] else None,
        float(got["accept_rate"]) if got["accept_rate"] else None,
        None if got["cuda_graph"] is None else got["cuda_graph"] == "True",
        float(got["gen_throughput"]) if got["gen_throughput"] else None,
        line.rstrip("\n"),
    )


def decode_lines(text: str) -> list[DecodeLine]:
    """Every ``Decode batch`` line of ``text``, in order."""
    out = []
    for n, line in enumerate(text.splitlines()):
        d = parse_decode_line(line, n)
        if d is not None:
            out.append(d)
    return out


def weighted_accept(lines: list[DecodeLine]) -> float | None:
    """``sum(running * accept_len) / sum(running)`` over lines carrying both (what ``/server_info``
    accumulates, up to the 2-decimal rounding of each line), or ``None``."""
    pairs = [(d.running, d.accept_len) for d in lines if d.running and d.accept_len is not None]
    n = sum(r for r, _ in pairs)
    return sum(r * a for r, a in pairs) / n if n else None


@dataclass(frozen=True)
class FaultLine:
    """A log line matching :data:`FAULT_PATTERNS` (0-based ``line_no``) and the pattern it matched."""

    line_no: int
    pattern: str
    text: str


def fault_lines(text: str, benign: tuple[str, ...] = BENIGN_PATTERNS) -> list[FaultLine]:
    """Fault lines of ``text`` (case-insensitive), minus lines holding a ``benign`` substring."""
    out = []
    for n, line in enumerate(text.splitlines()):
        low = line.lower()
        if any(b.lower() in low for b in benign):
            continue
        for p in FAULT_PATTERNS:
            if p.lower() in low:
                out.append(FaultLine(n, p, line.rstrip("\n")))
                break
    return out


_PROGRESS_BAR = re.compile(r"\d+%\|.*\|\s*\d+/\d+ \[")  # tqdm lines (CUDA-graph capture), noise in an excerpt
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")


def excerpt(text: str, line_no: int, before: int = 5, after: int = 30, limit: int = 4000) -> str:
    """Lines ``line_no - before .. line_no + after`` of ``text``, at most ``limit`` characters.

    A Python traceback that starts in the window is kept to its final line (``ModuleNotFoundError:
    No module named 'flash_mla'``), which names the cause; progress-bar lines are left out; past
    ``limit`` the middle is cut, so the
    head (where it started) and the tail (the exception) both stay.
    """
    lines = text.splitlines()
    lo, hi = max(0, line_no - before), min(len(lines), line_no + after + 1)
    start = next((k for k in range(lo, hi) if "Traceback (most recent call last)" in lines[k]), None)
    if start is not None:
        end = next((k for k in range(start + 1, len(lines)) if _EXCEPTION_LINE.match(lines[k])), None)
        if end is not None:
            hi = max(hi, end + 1)
    out = "\n".join(line for line in lines[lo:hi] if not _PROGRESS_BAR.search(line))
    if len(out) <= limit:
        return out
    head = limit // 3
    return out[:head] + "\n... (cut) ...\n" + out[len(out) - (limit - head - 17):]


def classify_log(text: str, hits: list[FaultLine]) -> str:
    """Fault class (:data:`ddtree_compat.faults.FAULT_CLASSES`) of a log with fault lines: the CUDA
    error if any line names one, else the class of the first hit's excerpt."""
    for h in hits:
        cls = classify(h.text)
        if cls != "other":
            return cls
    return classify(excerpt(text, hits[0].line_no)) if hits else "other"


_LOG_PREFIX = r"(?:\[[^\]\n]*\]\s*)?"  # SGLang's "[2026-12-01 09:11:14 TP0] "
_TRACEBACK_HEADER = re.compile(_LOG_PREFIX + r"(?:(?P<who>[A-Z]\w*) hit an exception: )?"
                               r"Traceback \(most recent call last\):\s*$")
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S.*?)\s*$')
_CHAINED = ("During handling of the above exception, another exception occurred:",
            "The above exception was the direct cause of the following exception:")
_TP_RANK = re.compile(r"^\[[^\]\n]*\bTP\d+\]")
SIGQUIT_PATTERNS: tuple[str, ...] = (
    r"Received sigquit from a child process",  # SGLang <= 0.5: "... It usually means the child failed."
    r"SIGQUIT received\b.*\bchild failed",  # later: "SIGQUIT received. signum=None, frame=None. It usually ..."
    r"crashed with exit code -?\d+\. Triggering SIGQUIT",  # "Subprocess scheduler_0 (pid=1007) crashed with ..."
)
"""SGLang's lines for a child process that failed (its parent got, or is about to send itself, SIGQUIT); the
process then lingers for crash diagnostics, 94-162 s on the lent H200, before it exits."""
_SIGQUIT = re.compile("|".join(SIGQUIT_PATTERNS), re.IGNORECASE)


@dataclass(frozen=True)
class RaisedTraceback:
    """A Python traceback in a server log, read to its last frame (where the exception was raised).

    Attributes:
        line_no: 0-based line of the header (``Traceback (most recent call last):``).
        process: who logged it: ``scheduler`` (``Scheduler hit an exception``, or a ``TPn`` log prefix), another
            SGLang process by its name (``detokenizer manager``), else ``server process``.
        file, line, function: the last frame (of the last traceback of a chain: the exception that was raised).
        exception: the exception line (``RuntimeError: CUDA error: ...``); ``""`` while it is not written yet.
    """

    line_no: int
    process: str
    file: str
    line: int
    function: str
    exception: str

    @property
    def summary(self) -> str:
        """``scheduler raised at /x/ddtree_worker.py:412 in verify: RuntimeError: ...``"""
        where = f"{self.process} raised at {self.file}:{self.line} in {self.function}"
        return f"{where}: {self.exception}" if self.exception else f"{where} (its exception line not written yet)"


def _who(header: re.Match, line: str) -> str:
    if header.group("who"):
        return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", header.group("who")).lower()  # DetokenizerManager -> ...
    return "scheduler" if _TP_RANK.match(line) else "server process"


def _read_traceback(lines: list[str], k: int) -> tuple[str, int, str, str, int]:
    """From the line after a header: ``(file, line, function, exception, next index)`` of its last frame; the
    file is ``""`` when no frame line follows the header. Lines another process logged in between (``[...]``
    prefix) are passed over; a chained traceback (``During handling ...``) replaces what came before."""
    file, line, function = "", 0, ""
    while k < len(lines):
        text = lines[k]
        frame = _FRAME.match(text)
        if frame:
            file, line, function = frame.group("file"), int(frame.group("line")), frame.group("function")
        elif not text.strip() or text[0].isspace() or text.startswith("["):
            pass  # the frame's source or ^^^ line, a blank line, or another process's log line
        elif not file:
            return "", 0, "", "", k  # no frame line after the header: not a traceback
        else:
            exception, k = text.strip(), k + 1
            rest = k  # past the rest of the exception's message (PyTorch's CUDA advice) and the blank line
            while rest < len(lines) and lines[rest].strip() and not lines[rest].startswith("["):
                rest += 1
            while rest < len(lines) and not lines[rest].strip():
                rest += 1
            if rest < len(lines) and lines[rest].strip() in _CHAINED:
                nxt = next((j for j in range(rest + 1, len(lines)) if lines[j].strip()), None)
                if nxt is not None and _TRACEBACK_HEADER.match(lines[nxt]):
                    chained = _read_traceback(lines, nxt + 1)
                    if chained[0]:
                        return chained
            return file, line, function, exception, k
        k += 1
    return file, line, function, "", k


def raised_traceback(text: str) -> RaisedTraceback | None:
    """The first Python traceback of ``text`` whose header opens a line (after SGLang's optional ``[...] ``
    prefix and ``<Process> hit an exception: ``) and is followed by a frame line, or ``None``.

    A header inside other text (``Can not initialize OpenAIServingResponses, error: Traceback ...``, a warning
    quoting one) does not count. The answer's ``exception`` is ``""`` while its exception line is not in ``text``.
    """
    lines = text.splitlines()
    for n, line in enumerate(lines):
        header = _TRACEBACK_HEADER.match(line)
        if header is None:
            continue
        file, lineno, function, exception, _ = _read_traceback(lines, n + 1)
        if file:
            return RaisedTraceback(n, _who(header, line), file, lineno, function, exception)
    return None


def sigquit_line(text: str) -> FaultLine | None:
    """The first of SGLang's SIGQUIT lines in ``text`` (:data:`SIGQUIT_PATTERNS`: a child process failed), or
    ``None``."""
    for n, line in enumerate(text.splitlines()):
        m = _SIGQUIT.search(line)
        if m:
            return FaultLine(n, m.group(0), line.rstrip("\n"))
    return None


@dataclass(frozen=True)
class ChildFailure:
    """A server child that failed, read from the log (:func:`child_failure`).

    Attributes:
        line_no: 0-based line where it shows first (the traceback's header, else the SIGQUIT line).
        fault_class: :data:`ddtree_compat.faults.FAULT_CLASSES`: the exception line's class, else (no exception
            line) the class of the log's fault lines as for a server that exited, else ``other``.
        message: ``scheduler raised at FILE:LINE in FUNCTION: EXCEPTION`` or the SIGQUIT line.
        traceback: the traceback, when there is one.
    """

    line_no: int
    fault_class: str
    message: str
    traceback: RaisedTraceback | None = None


def child_failure(text: str) -> ChildFailure | None:
    """A traceback (:func:`raised_traceback`) or SGLang's SIGQUIT line (:func:`sigquit_line`) in ``text``, or
    ``None``: what tells, long before the server exits, that a child of it failed."""
    tb, quit_line = raised_traceback(text), sigquit_line(text)
    if tb is None and quit_line is None:
        return None
    first = min(x.line_no for x in (tb, quit_line) if x is not None)
    if tb is not None and tb.exception:
        return ChildFailure(first, classify(tb.exception), tb.summary, tb)
    hits = fault_lines(text)
    fault_class = classify_log(text, hits) if hits else "other"
    if tb is not None:
        return ChildFailure(first, fault_class, tb.summary, tb)
    return ChildFailure(first, fault_class, f"SGLang says a child process failed: {quit_line.text.strip()}")


def metric_values(text: str) -> dict[str, list[float]]:
    """Prometheus text -> ``{sample name: [value per label set]}`` (``sglang:...``).

    Raises:
        ImportError: ``prometheus_client`` is not installed.
        ValueError: the text is not Prometheus exposition format.
    """
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(float(s.value))
    return out


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> ``{sample name: value summed over label sets}`` (counters; a gauge written by one
    process has one nonzero label set). Raises as :func:`metric_values`."""
    return {k: sum(v) for k, v in metric_values(text).items()}


def server_info_accept(info: dict) -> float | None:
    """``internal_states[0].avg_spec_accept_length`` of a ``/server_info`` response, or ``None``."""
    states = info.get("internal_states") or []
    if states and isinstance(states[0], dict):
        value = states[0].get("avg_spec_accept_length")
        return float(value) if value is not None else None
    return None


_ATTENTION = re.compile(r"""['"]attention_backend['"]:\s*['"](\w+)['"]""")


def attention_backend(text: str) -> str:
    """The attention backend a server logged in its ``server_args={...}`` line (the value after SGLang's own
    selection: SGLang 0.5.23 picks it at server start, ``Attention backend not specified. Use flashinfer
    backend by default.``), or ``""`` when the log holds none yet."""
    found = _ATTENTION.findall(text)
    return found[-1] if found else ""
