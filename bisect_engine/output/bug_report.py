"""``bug_report.md``: a GitHub issue body in the shape of PyTorch's bug template, from ``report.json``.

:func:`render_bug_report` is pure and torch-free: a suggested title, what differs (with the
numbers), the minimal repro inline when it is short (else what to attach and an excerpt), the
culprit's kernel when the report has one, the Inductor subsystem and its workaround, and the
``Versions`` section (``python -m torch.utils.collect_env``, collected by
:class:`Versions`, the one class here with a side effect: collect_env run in a thread or a subprocess). A finding the
model makes itself (NaN in eager too) is said to be a model issue, not a compiler bug. A clean
run has no bug report.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

from ..verdicts import FINDINGS, Verdict
from .wording import (culprit_ops, decomposition_answer, exact_reason, saved_layout_answer, short_number, subsystem_sentence, ulps,
                      within_upstream_sentences)

GITHUB_BODY_LIMIT = 65_536  # characters GitHub accepts in an issue body
INLINE_REPRO_LIMIT = 20_000  # characters: a longer repro is attached, with an excerpt inline
KERNEL_LIMIT = 6_000  # characters of each kernel's source quoted
VERSIONS_LIMIT = 12_000
SIDECAR_NAME = "repro_inputs.bin"  # bisect_engine.output.repro.SIDECAR_NAME (that module imports torch)


# ``python -m torch.utils.collect_env``, niced: started while the search still runs, it takes the
# search's idle cycles, not its CPU.
_COLLECT_ENV = ("import os, runpy\nif hasattr(os, 'nice'):\n    os.nice(10)\n"
                "runpy.run_module('torch.utils.collect_env', run_name='__main__', alter_sys=True)\n")
_RERUN = "run `python -m torch.utils.collect_env`"


class Versions:
    """The ``Versions`` text: ``python -m torch.utils.collect_env``'s, started ahead with :meth:`start`
    (when a finding is likely) and read with :meth:`text`; :meth:`close` ends one never read. A
    failure is written into the text (the report is still useful without it), never raised.

    Where this process already has torch and collecting cannot initialise a GPU runtime behind the
    program's back (none is built in, or CUDA is initialised already), it runs here, in a niced
    thread: only its shell commands cost (about a second, against three or four for a fresh
    interpreter importing torch). Elsewhere, or with ``command`` given, it is that subprocess."""

    def __init__(self, command: tuple[str, ...] | None = None) -> None:
        self.command = command or (sys.executable, "-c", _COLLECT_ENV)
        self._in_process = command is None and _collect_here_is_safe()
        self._process: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None
        self._collected: list[str] = []
        self._failed: str | None = None

    def start(self) -> None:
        if self._process is not None or self._thread is not None or self._failed is not None:
            return
        if self._in_process:
            self._thread = threading.Thread(target=self._collect_here, name="bisect-collect-env", daemon=True)
            self._thread.start()
            return
        try:
            self._process = subprocess.Popen(list(self.command), stdin=subprocess.DEVNULL,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as error:
            self._failed = f"(collect_env could not start: {error}; {_RERUN})"

    def _collect_here(self) -> None:
        try:
            if hasattr(os, "setpriority"):  # this thread (and the commands it starts) only: the search's idle cycles
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
            from torch.utils import collect_env

            self._collected.append(collect_env.get_pretty_env_info())
        except Exception as error:  # collect_env's own failure: said in the text, never raised
            self._failed = f"(collect_env failed: {type(error).__name__}: {error}; {_RERUN})"

    def text(self, timeout_s: float = 60) -> str:
        """The collected text, waiting at most ``timeout_s`` more (started now if it was not)."""
        self.start()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                return f"(collect_env did not finish within {timeout_s:g} s; {_RERUN})"
            return self._failed or (self._collected[0].strip() if self._collected and self._collected[0].strip()
                                    else f"(collect_env failed: no output; {_RERUN})")
        if self._process is None:
            return self._failed or f"(collect_env did not start; {_RERUN})"
        try:
            out, err = self._process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.close()
            return f"(collect_env did not finish within {timeout_s:g} s; {_RERUN})"
        if self._process.returncode != 0 or not out.strip():
            last = (err.strip().splitlines() or ["no output"])[-1]
            return f"(collect_env failed with exit status {self._process.returncode}: {last})"
        return out.strip()

    def close(self) -> None:
        """Ends a subprocess never read (a thread here, daemonic, ends with its shell commands)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.communicate()


def _collect_here_is_safe() -> bool:
    """collect_env asks CUDA (``is_available``, then ``torch.cuda.init()``): in a process that has
    not initialised it, that would break a later ``fork`` of the program's (a DataLoader's workers).
    Safe here only where no GPU runtime is built into torch, or CUDA is initialised already."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        version = torch.version
        no_gpu_runtime = (version.cuda is None and getattr(version, "hip", None) is None
                          and getattr(version, "xpu", None) is None)
        return no_gpu_runtime or bool(torch.cuda.is_initialized())
    except Exception:
        return False


def collect_versions(timeout_s: float = 60) -> str:
    """``python -m torch.utils.collect_env`` now, within ``timeout_s`` (:class:`Versions`)."""
    return Versions().text(timeout_s)


def is_model_issue(report: dict[str, Any]) -> bool:
    culprit, nan = report.get("culprit") or {}, report.get("nan") or {}
    return culprit.get("made_by") == "model" or (not culprit and nan.get("made_by") == "model")


def is_input_problem(report: dict[str, Any]) -> bool:
    """NaN/Inf that come from the data fed to the model: an input problem, never a compiler bug report."""
    culprit = report.get("culprit") or {}
    return report.get("verdict") == "nan" and not culprit and (report.get("nan") or {}).get("made_by") == "input"


def culprit_dtype(report: dict[str, Any]) -> str | None:
    """The dtype of the culprit's output, read from its digest."""
    culprit = report.get("culprit") or {}
    wanted = {(culprit.get("error") or {}).get("output"), *(culprit.get("nodes") or [culprit.get("node")])} - {None}
    for graph in report.get("graphs") or []:
        if graph.get("name") != culprit.get("graph"):
            continue
        for entry in graph.get("digests") or []:
            if entry.get("node") in wanted or entry.get("producer") in wanted:
                return (entry.get("eager") or {}).get("dtype")
    return None


def device_words(report: dict[str, Any]) -> str | None:
    """``CPU`` / ``CUDA``: the culprit's device, else what the environment allows one to tell."""
    device = (report.get("culprit") or {}).get("device")
    if device:
        return "CPU" if device == "cpu" else str(device).upper()
    if (report.get("environment") or {}).get("gpu", (report.get("environment") or {}).get("cuda", "none")) == "none":
        return "CPU"
    return None


def users_backend(report: dict[str, Any]) -> str | None:
    """The user's backend that rewrote the graph itself (a finding about their code, not Inductor's)."""
    culprit = report.get("culprit") or {}
    by = str(culprit.get("pass") or "")
    return by[len("backend "):] if culprit.get("kind") == "pre_grad" and by.startswith("backend ") else None


def title(report: dict[str, Any]) -> str:
    culprit, nan = report.get("culprit") or {}, report.get("nan") or {}
    if users_backend(report):
        return f"[your backend, not an Inductor bug] {users_backend(report)} rewrites {culprit.get('node')} ({culprit.get('op')})"
    if culprit.get("kind") == "capture_decomposition":
        return f"[decompositions] {culprit.get('op')} decomposes into ops that disagree with eager's kernel: wrong results under torch.compile"
    if culprit.get("kind") == "pre_grad":
        return f"[inductor] pre-grad pass {culprit.get('pass') or '?'} rewrites {culprit.get('node')} into {culprit.get('op')}: wrong results"
    where = "/".join(w for w in (device_words(report), culprit_dtype(report)) if w)
    on = f" on {where}" if where else ""
    op = culprit_ops(culprit) if culprit else (nan.get("compiled") or nan.get("eager") or {}).get("op", "?")
    if is_model_issue(report):
        return f"[model, not a compiler bug] {op} makes NaN/Inf in eager too{on}"
    if culprit.get("crash"):
        return f"[inductor] {op} fails to compile{on}: {culprit['crash'].get('exception')}"
    if report.get("verdict") == "nan" and not culprit.get("error"):
        return f"[inductor] {op} gives NaN/Inf{on} where eager is finite"
    if culprit.get("kind") == "saved_layout":
        return f"[inductor] {op} misreads a value the compiled forward saves in another memory layout{on}: wrong gradients"
    if culprit.get("kind") == "amplified":
        return (f"[inductor] {op} differs from eager by a few ulps{on}, amplified by "
                f"{culprit.get('amplifier') or 'a later op'} into a different output")
    together = " compiled together" if culprit.get("kind") == "window" else ""
    subsystem = report.get("subsystem") or {}
    blame = "" if not subsystem else (f" ({subsystem.get('kind')})" if subsystem.get("name") in op
                                      else f" ({subsystem.get('kind')} {subsystem.get('name')})")
    return f"[inductor] {op}{together} gives wrong results{on}{blame}"


def render_bug_report(report: dict[str, Any], versions: str, repro_text: str | None) -> str | None:
    """The issue body for ``report``'s finding; None when there is nothing to report (a clean run,
    or one stopped before any finding)."""
    if report.get("verdict") not in FINDINGS:
        return None
    sections = [
        f"<!-- Suggested title: {title(report)} -->",
        "### 🐛 Describe the bug",
        _lead(report),
        _what_differs(report),
        _nan_lines(report),
        _repro_block(report, repro_text),
        _kernels_block(report),
        _subsystem_block(report),
        _within_upstream_block(report),
        "### Versions",
        _fence(_clip(versions.strip() or "(not collected)", VERSIONS_LIMIT), ""),
        "<sub>Found and reduced by bisect-accuracy; the full report is report.json / report.html.</sub>",
    ]
    body = "\n\n".join(part for part in sections if part) + "\n"
    if len(body) > GITHUB_BODY_LIMIT:
        note = "\n\n(cut to fit GitHub's issue size limit: attach report.json and repro.py)\n"
        body = body[: GITHUB_BODY_LIMIT - len(note)] + note
    return body


def _lead(report: dict[str, Any]) -> str:
    culprit, nan = report.get("culprit") or {}, report.get("nan") or {}
    if is_model_issue(report):
        origin = nan.get("eager") or {}
        return ("**This is a model issue, not a compiler bug**: eager makes NaN/Inf at the same op "
                f"(`{origin.get('op') or culprit.get('op')}`, {origin.get('source') or culprit.get('source') or 'source unknown'}), "
                "so torch.compile is not to blame. Fix the model; do not file this against PyTorch.")
    if not culprit and not nan and report.get("verdict") == Verdict.NOT_REPRODUCIBLE:
        return ("`torch.compile` (Inductor) disagrees with eager on this model as a whole, but every captured graph "
                "matches on its own (each compiled alone by Inductor, judged against fp64), so no op was named. "
                "Attach report.json and the model; the difference may come from how graphs are stitched at run "
                "time (guards, recompiles, graph breaks) rather than from one kernel.")
    if not culprit and not nan:
        stopped = f" ({report['budget']})" if report.get("budget") else ""
        return ("`torch.compile` (Inductor) disagrees with eager on this model, but the search did not name an op"
                f"{stopped}. Rerun bisect-accuracy with a larger budget before filing: a named op makes a much "
                "better report.")
    op = f"`{culprit_ops(culprit)}`" if culprit else "an op"
    where = f" (`{culprit['source']}`, module `{culprit.get('module') or '<top>'}`)" if culprit.get("source") else ""
    if culprit.get("kind") == "capture_decomposition":
        return f"Under `torch.compile`, {op}{where} gives other results than eager. {decomposition_answer(culprit)}"
    if culprit.get("kind") == "pre_grad":
        rewrite = f"`{culprit.get('before') or '(new)'}` into `{culprit.get('after') or '(removed)'}`{where}"
        if users_backend(report):
            return (f"**This is the backend's own rewrite, not an Inductor bug**: the backend `{users_backend(report)}` "
                    f"given to torch.compile rewrites {rewrite} before it hands the graph to Inductor; every graph "
                    "it hands Inductor compiles right. Fix the backend; do not file this against PyTorch.")
        return (f"Under `torch.compile` (Inductor), the pre-grad pass `{culprit.get('pass') or '?'}` rewrites {rewrite} "
                f"on the torch-level graph, which then runs {op}: the outputs disagree with eager "
                f"(max abs diff {culprit.get('max_abs_diff')}).")
    if culprit.get("crash"):
        crash = culprit["crash"]
        return (f"Compiling {op}{where} with Inductor raises `{crash.get('exception')}`; eager runs it fine."
                f"\n\n{_fence(crash.get('message') or '', '')}")
    if culprit.get("kind") == "saved_layout":
        return f"Under `torch.compile` (Inductor), {op}{where} gives other gradients than eager. {saved_layout_answer(culprit)}"
    if report.get("verdict") == "nan" and not culprit.get("error"):
        return f"Under `torch.compile` (Inductor), {op}{where} produces NaN/Inf where eager stays finite."
    return (f"Under `torch.compile` (Inductor), {op}{where} gives results that disagree with eager: its error "
            "against an fp64 reference clearly exceeds eager's own error.")


def _what_differs(report: dict[str, Any]) -> str:
    culprit = report.get("culprit") or {}
    if not culprit or is_model_issue(report):
        return ""
    rows = [("op", f"`{culprit.get('op')}` (node `{culprit.get('node')}` of graph `{culprit.get('graph')}`)")]
    if culprit.get("kind") == "saved_layout":
        layout, out = culprit.get("saved_layout") or {}, culprit.get("output_difference") or {}
        rows += [("saved for the backward", f"`{layout.get('value')}` by `{(layout.get('saved_by') or {}).get('op')}`"),
                 ("strides", f"compiled {layout.get('compiled_strides')}, eager {layout.get('eager_strides')} (same values)"),
                 ("differs", f"{out.get('gradient_of') or out.get('output')}: {out.get('elements')} of {out.get('total')} "
                             f"elements, max abs diff {short_number(out.get('max_abs_diff'))}")]
        return _differs_table(rows)
    if culprit.get("kind") == "capture_decomposition":
        rows += [("call", f"`{culprit.get('before')}`"), ("traced as", ", ".join(f"`{o}`" for o in culprit.get("traced_as") or [])),
                 ("max abs diff", str(culprit.get("max_abs_diff")))]
        return _differs_table(rows)
    if culprit.get("kind") == "pre_grad":
        rows += [("rewritten by", f"`{culprit.get('pass')}`"), ("before", f"`{culprit.get('before')}`"),
                 ("after", f"`{culprit.get('after')}`"), ("max abs diff", str(culprit.get("max_abs_diff")))]
        return _differs_table(rows)
    if len(culprit.get("ops") or []) > 1:
        rows.append(("ops compiled together", ", ".join(f"`{op}`" for op in culprit["ops"])))
    dropped = culprit.get("dropped_work")
    if dropped:
        rows.append(("work dropped", f"the compiled outputs are eager's with `{dropped.get('node')}` skipped (its input "
                                     f"`{dropped.get('kept')}` passed through): max abs diff "
                                     f"{short_number(dropped.get('max_abs_diff'))} to that, "
                                     f"{short_number(dropped.get('eager_max_abs_diff'))} to eager"))
    if culprit.get("forward_op"):
        rows.append(("backward of", f"`{culprit['forward_op'].get('op')}`"))
    rows += _error_rows(culprit.get("error"), culprit_dtype(report))
    if culprit.get("confirmed_alone") is not None:
        rows.append(("compiled alone", "still fails" if culprit["confirmed_alone"] else "matches (needs its neighbours)"))
    stats = report.get("stats") or {}
    rows.append(("found with", f"{stats.get('compiles', '?')} Inductor compiles, {stats.get('seconds', '?')} s"))
    in_ulps = bool(culprit.get("error")) and not exact_reason(culprit["error"])  # an exact rule's facts have no ulps
    return _differs_table(rows, "Errors are in ulps: units of the output dtype's rounding at the tensor's scale, against "
                               "the same graph run in float64; eager's own error is the bar (compiled fails when it is "
                               "clearly worse than eager's)." if in_ulps else "")


def _differs_table(rows: list[tuple[str, str]], after: str = "") -> str:
    """The bug report's "What differs" table, then ``after`` (a paragraph) where there is one."""
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    return f"**What differs**\n\n| | |\n|---|---|\n{table}" + (f"\n\n{after}" if after else "")


def _error_rows(error: dict[str, Any] | None, dtype: str | None) -> list[tuple[str, str]]:
    if not error:
        return []
    unit = f"ulps of {dtype}" if dtype else "ulps"
    rows = [("judged by equality", str(error.get("reason")))] if exact_reason(error) else [
        (f"error vs fp64, RMS / max ({unit})",
         f"compiled **{ulps(error.get('compiled_rms_ulps'))}** / {ulps(error.get('compiled_max_ulps'))}; "
         f"eager's own {ulps(error.get('eager_rms_ulps'))} / {ulps(error.get('eager_max_ulps'))}")]
    if "max_abs_diff" in error:
        relative = f", max rel diff {short_number(error['max_rel_diff'])}" if "max_rel_diff" in error else ""
        rows.append(("compiled vs eager", f"max abs diff {short_number(error['max_abs_diff'])}{relative}"))
    if error.get("new_nonfinite"):
        rows.append(("new NaN/Inf entries", str(error["new_nonfinite"])))
    return rows


def _nan_lines(report: dict[str, Any]) -> str:
    nan = report.get("nan") or {}
    lines = []
    for side in ("eager", "compiled"):
        origin = nan.get(side)
        where = (f"`{origin.get('op')}` at `{origin.get('source') or '?'}`: {origin.get('cause')}"
                 if origin else "none (stays finite)")
        lines.append(f"- first NaN/Inf in {side}: {where}")
    return "**NaN/Inf**\n\n" + "\n".join(lines) if nan else ""


def _repro_block(report: dict[str, Any], repro_text: str | None) -> str:
    repro = report.get("repro") or {}
    if not repro and repro_text is None and users_backend(report):
        return ("**Minimal repro**: none (the rewrite is the backend's own code; report.json `pre_grad` holds "
                "the node before and after).")
    if not repro and repro_text is None:
        return "**Minimal repro**: none was written (the run stopped before the repro stage)."
    checked = (f"verified in fresh processes: {repro.get('status')} {repro.get('reproduced', '')}; "
               if repro.get("runs") else "")
    how = (f"Needs only torch; {checked}`python repro.py` exits 1 when it reproduces, 0 when it does not "
           "(usable with `git bisect run`).")
    if repro_text is not None and len(repro_text) <= INLINE_REPRO_LIMIT:
        return f"**Minimal repro** ({how})\n\n{_fence(repro_text.rstrip(), 'python')}"
    sidecar = repro_text is not None and f"INPUTS_FILE = {SIDECAR_NAME!r}" in repro_text
    files = "`repro.py`" + (f" and its data file `{SIDECAR_NAME}` (beside it)" if sidecar else "")
    size = f" ({len(repro_text):,} characters)" if repro_text is not None else ""
    excerpt = _excerpt(repro_text or "")
    core = f" Its failing subgraph:\n\n{_fence(excerpt, 'python')}" if excerpt else ""
    return (f"**Minimal repro**: the script{size} is too long to paste here: **please attach {files}**. "
            f"{how}{core}")


def _excerpt(repro_text: str) -> str:
    """The repro's config and failing subgraph (between its own section comments), or ''."""
    lines = repro_text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(("# The non-default Inductor config",
                                                                    "# The minimal failing subgraph"))]
    ends = [i for i, line in enumerate(lines) if line.startswith("OUTPUT_NAMES")]
    if not starts or not ends or ends[0] < starts[0]:
        return ""
    return _clip("\n".join(lines[starts[0]: ends[0] + 1]), INLINE_REPRO_LIMIT // 2)


def _kernels_block(report: dict[str, Any]) -> str:
    kernels = (report.get("culprit") or {}).get("kernels") or []
    parts = []
    for kernel in kernels[:3]:
        source = str(kernel.get("source") or "")
        language = "cpp" if ("#include" in source or 'extern "C"' in source) else "python"
        nodes = ", ".join(f"`{n}`" for n in kernel.get("nodes") or [])
        parts.append(f"`{kernel.get('name')}`{' (nodes ' + nodes + ')' if nodes else ''}:\n\n"
                     f"{_fence(_clip(source, KERNEL_LIMIT), language)}")
    if len(kernels) > 3:
        parts.append(f"({len(kernels) - 3} more kernel(s) in report.json)")
    return "**Generated kernel** (Inductor's code for the culprit)\n\n" + "\n\n".join(parts) if parts else ""


def _subsystem_block(report: dict[str, Any]) -> str:
    subsystem = report.get("subsystem")
    if not subsystem:
        return ""
    block = (f"**Inductor subsystem**: {subsystem.get('kind')} `{subsystem.get('name')}`: "
             f"{subsystem_sentence(subsystem)}")
    if subsystem.get("workaround"):
        block += f"\n\nWorkaround until it is fixed:\n\n{_fence(subsystem['workaround'], 'python')}"
    return block


def _within_upstream_block(report: dict[str, Any]) -> str:
    """Other findings the upstream gate listed (issue 36): named, so nobody files them as bugs."""
    sentences = within_upstream_sentences(report)
    if not sentences:
        return ""
    return "**Listed, not divergences** (within upstream's `torch._dynamo.utils.same` against fp64)\n\n" + \
        "\n".join(f"- {sentence}" for sentence in sentences)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n... ({len(text) - limit:,} more characters)"


def _fence(text: str, language: str) -> str:
    """A fenced code block whose fence is longer than any run of backticks inside ``text``."""
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"
