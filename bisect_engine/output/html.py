"""``report.html``: one self-contained page rendered from ``report.json``, answer first.

:func:`render_html` is pure (same report, same bytes) and torch-free: inline CSS, JavaScript and
SVG, nothing fetched, so it opens from ``file://`` anywhere. Every string that comes from the
report (file names, op names, messages, code) is HTML-escaped. Order: the verdict and a one-line
answer; cards for the culprit, the Inductor subsystem and the repro; findings the upstream gate
listed (``within_upstream``); each graph's divergence
profile with its sortable, filterable node table; NaN forensics; kernels; the repro's runs;
the bug report; statistics and the environment.
"""
from __future__ import annotations

from html import escape
from typing import Any

from ..verdicts import LOCALISED as FINDINGS
from .html_assets import SCRIPT, STYLE
from .profile import NodeRow, node_rows, profile_svg
from .wording import answer, headline, short_number, subsystem_sentence, ulps, within_upstream_sentences

EMBED_REPRO_LIMIT = 100_000  # characters: a longer repro is linked, not embedded


def esc(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def render_html(report: dict[str, Any], repro_text: str | None = None, bug_report: str | None = None) -> str:
    """The page for ``report``; ``repro_text`` (the repro script) and ``bug_report`` (the issue
    body) are embedded with copy buttons when given."""
    body = "".join([
        _answer_block(report, bug_report),
        _cards(report),
        _within_upstream_section(report),
        _profiles(report),
        _nan_section(report.get("nan")),
        _kernels_section((report.get("culprit") or {}).get("kernels")),
        _repro_section(report.get("repro"), repro_text),
        _bug_report_section(bug_report),
        _script_section(report.get("script")),
        _stats_section(report),
        _environment_section(report.get("environment")),
    ])
    footer = (f"<footer>Rendered by bisect-accuracy from report.json (schema {esc(report.get('schema'))}); "
              f"re-render with <code>bisect-accuracy report OUT</code>.</footer>")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(report.get('verdict', '?'))}: {esc(headline(report))} (bisect-accuracy)</title>"
            f"<style>{STYLE}</style></head><body><main>{body}{footer}</main>"
            f"<script>{SCRIPT}</script></body></html>\n")


def _within_upstream_section(report: dict[str, Any]) -> str:
    """Findings the upstream gate listed (issue 36): beside the verdict, where users read."""
    sentences = within_upstream_sentences(report)
    if not sentences:
        return ""
    items = "".join(f"<li>{esc(sentence)}</li>" for sentence in sentences)
    return (f'<section id="within-upstream"><h2>Listed, within upstream&#39;s tolerance</h2>'
            f"<p>Wrong by the tool&#39;s ulp rule alone, while the program&#39;s outputs pass "
            f"<code>torch._dynamo.utils.same</code> against fp64: not a divergence.</p><ul>{items}</ul></section>")


def verdict_class(verdict: Any) -> str:
    if verdict in FINDINGS:
        return "v-bad"
    return {"clean": "v-good", "not_reproducible": "v-warn", "incomplete": "v-warn"}.get(str(verdict), "")


def _answer_block(report: dict[str, Any], bug_report: str | None) -> str:
    stats = report.get("stats") or {}
    model = str(report.get("model") or "?").rsplit("/", 1)[-1]
    meta = [f"model <code>{esc(model)}</code>", f"{len(report.get('graphs') or [])} graph(s)",
            f"{esc(stats.get('compiles', '?'))} Inductor compiles in {esc(stats.get('seconds', '?'))} s",
            f"torch {esc((report.get('environment') or {}).get('torch', '?'))}"]
    links = [("within-upstream", "listed"), ("profile", "profile"), ("nan", "NaN/Inf"), ("kernels", "kernels"), ("repro", "repro"),
             ("bug-report", "bug report"), ("stats", "stats"), ("environment", "environment")]
    present = {"within-upstream": within_upstream_sentences(report), "nan": report.get("nan"), "kernels": (report.get("culprit") or {}).get("kernels"),
               "repro": report.get("repro"), "bug-report": bug_report}
    nav = " ".join(f'<a href="#{anchor}">{words}</a>' for anchor, words in links
                   if present.get(anchor, True))
    return (f'<header class="answer {verdict_class(report.get("verdict"))}" id="verdict">'
            f'<span class="badge">{esc(str(report.get("verdict", "?")).upper())}</span>'
            f"<h1>{esc(headline(report))}</h1><p>{esc(answer(report))}</p>"
            f'<p class="meta">{" · ".join(meta)}</p><nav>{nav}</nav></header>')


def _dl(pairs: list[tuple[str, str]]) -> str:
    """A definition list; values are markup (escape them first)."""
    return "<dl>" + "".join(f"<dt>{esc(term)}</dt><dd>{value}</dd>" for term, value in pairs) + "</dl>"


def _pre(text: str, element_id: str | None = None) -> str:
    identity = f' id="{esc(element_id)}"' if element_id else ""
    return f"<pre{identity}>{esc(text)}</pre>"


def _copy_button(target: str, words: str = "copy") -> str:
    return f'<button class="copy" type="button" data-copy="{esc(target)}">{esc(words)}</button>'


def _cards(report: dict[str, Any]) -> str:
    culprit = report.get("culprit")
    if culprit:
        cards = [_culprit_card(culprit), _subsystem_card(report), _repro_card(report.get("repro"))]
    elif report.get("verdict") in FINDINGS:
        cards = [_graphs_card(report), _subsystem_card(report), _repro_card(report.get("repro"))]
    else:
        cards = [_graphs_card(report), METHOD_CARD]
    return f'<section class="cards">{"".join(cards)}</section>'


METHOD_CARD = (
    '<div class="card" style="grid-column:span 2"><h3>How it was checked</h3><p>Each captured aten graph was '
    "compiled whole by Inductor and run on the model's real inputs; every output was compared with eager in its "
    "dtype and with the same graph in float64. Errors are in ulps of the output dtype at the tensor's scale; a "
    "compiled value fails when its error clearly exceeds eager's own (more than 2x, plus 8 ulps RMS or 64 ulps max), "
    "or turns NaN/Inf where eager does not. Per-node errors are measured when a graph diverges.</p></div>"
)


def _culprit_card(culprit: dict[str, Any]) -> str:
    ops = culprit.get("ops") or [culprit.get("op")]
    where = (f'<code title="{esc(culprit.get("source_path"))}">{esc(culprit.get("source") or "unknown")}</code>'
             f" · module <code>{esc(culprit.get('module') or '<top>')}</code>")
    pairs = [("op", f'<span class="big">{esc(culprit.get("op"))}</span>'),
             ("node", f"<code>{esc(culprit.get('node'))}</code> of {esc(culprit.get('graph'))}"
                      f"{' (a window: ' + esc(', '.join(map(str, ops))) + ')' if len(ops) > 1 else ''}"),
             ("source", where)]
    if culprit.get("forward_op"):
        forward = culprit["forward_op"]
        pairs.append(("backward of", f"{esc(forward.get('op'))} (node {esc(forward.get('node'))})"))
    pairs += _error_pairs(culprit.get("error"))
    confirmed = culprit.get("confirmed_alone")
    alone = {True: '<span class="bad">still fails (confirmed)</span>',
             False: "matches: it fails only beside its neighbours"}.get(bool(confirmed), "not checked") \
        if confirmed is not None else "not checked"
    spread = f" · spreads to {len(culprit['propagators'])} node(s) downstream" if culprit.get("propagators") else ""
    if culprit.get("made_by") == "model":
        pairs.append(("made by", '<b>the model</b>: eager does it too, not a compiler bug'))
    else:
        pairs.append(("compiled alone", alone + spread))
    crash = culprit.get("crash")
    crash_block = (f'<div class="crash"><b class="bad">raised {esc(crash.get("exception"))}</b>'
                   f'{_pre(crash.get("message") or "")}</div>') if crash else ""
    return f'<div class="card"><h3>Culprit</h3>{_dl(pairs)}{crash_block}</div>'


def _error_pairs(error: dict[str, Any] | None) -> list[tuple[str, str]]:
    if not error:
        return []
    pairs = [("error vs fp64", f'compiled <b class="bad">{esc(ulps(error.get("compiled_rms_ulps")))}</b> ulps RMS '
                               f"(max {esc(ulps(error.get('compiled_max_ulps')))}) · eager's own "
                               f"<b>{esc(ulps(error.get('eager_rms_ulps')))}</b> "
                               f"(max {esc(ulps(error.get('eager_max_ulps')))})")]
    if "max_abs_diff" in error:
        relative = f", max rel {esc(short_number(error['max_rel_diff']))}" if "max_rel_diff" in error else ""
        pairs.append(("vs eager", f"max abs diff {esc(short_number(error['max_abs_diff']))}{relative}"))
    if error.get("new_nonfinite"):
        pairs.append(("NaN/Inf", f"{esc(error['new_nonfinite'])} new non-finite entries"))
    return pairs


def _whole_by(graph: dict[str, Any]) -> str:
    """How the whole graph's verdict was learned, when not by compiling it (report ``not_checked``)."""
    if graph.get("whole_by") == "eager_injection":
        return " (not compiled: the culprit's compiled value, replayed eagerly, makes its outputs diverge)"
    segment = graph.get("segment")
    if segment:
        return (f" (segment {esc(segment['index'])} of {esc(segment['count'])} of {esc(segment['of'])}: "
                f"{esc(' .. '.join(dict.fromkeys(segment['modules'])))}, judged on eager's values at its boundary)")
    return ""


def _graphs_card(report: dict[str, Any]) -> str:
    rows = [(str(g.get("name")), f"{esc(g.get('kind'))}, {esc(g.get('nodes'))} nodes: whole graph "
                                 f"<b>{esc(g.get('whole'))}</b>{_whole_by(g)}") for g in report.get("graphs") or []]
    if report.get("model_level"):
        rows.append(("model", f"torch.compile of the whole model: <b>{esc(report['model_level'])}</b>"))
    for harness in report.get("harness") or []:
        done = ("judged with its views as reshapes" if harness.get("judged")
                else "its whole compile not judged (each node was)")
        rows.append(("harness", f'<span class="warn">our recompile of {esc(harness.get("graph"))} failed where '
                                f'torch.compile works ({esc(harness.get("problem"))}); not a compiler finding: {esc(done)}</span>'))
    pre_grad = report.get("pre_grad")
    if pre_grad:
        for node in pre_grad.get("rewritten") or []:
            rows.append(("pre-grad", f"<code>{esc(node.get('before') or '(new)')}</code> &rarr; "
                                     f"<code>{esc(node.get('after') or '(removed)')}</code> at {esc(node.get('source') or '?')} "
                                     f"(aten: {esc(', '.join(node.get('aten_ops') or []) or '?')})"))
    if report.get("budget"):
        rows.append(("stopped", f'<span class="warn">{esc(report["budget"])}</span>'))
    return f'<div class="card"><h3>Graphs</h3>{_dl(rows) if rows else "<p>no graph was judged</p>"}</div>'


def _subsystem_card(report: dict[str, Any]) -> str:
    subsystem = report.get("subsystem")
    if not subsystem:
        culprit = report.get("culprit") or {}
        why = ("not searched: the finding is the model's own" if culprit.get("made_by") == "model"
               else "none named" if culprit else "nothing to attribute")
        return f'<div class="card"><h3>Inductor subsystem</h3><p>{esc(why)}</p></div>'
    workaround = subsystem.get("workaround") or ""
    note = f"<p>{esc(subsystem['note'])}</p>" if subsystem.get("note") else ""
    block = note + (f"<p><b>Workaround</b> {_copy_button('workaround')}</p>{_pre(workaround, 'workaround')}"
             if workaround else "")
    return (f'<div class="card" id="subsystem"><h3>Inductor subsystem</h3>'
            f'<p><span class="big">{esc(subsystem.get("kind"))}</span> <code>{esc(subsystem.get("name"))}</code></p>'
            f"<p>{esc(subsystem_sentence(subsystem))}</p>{block}</div>")


def _repro_card(repro: dict[str, Any] | None) -> str:
    if not repro:
        return '<div class="card"><h3>Repro</h3><p>none written (no finding, or the run stopped before the repro stage)</p></div>'
    status = str(repro.get("status") or "?")
    tone = "bad" if status == "REPRODUCED" else "warn"
    pairs = [("status", f'<b class="{tone}">{esc(status)}</b> {esc(repro.get("reproduced") or "")}'
                        f"{' in fresh processes' if repro.get('runs') else ''}"),
             ("path", f"<code>{esc(repro.get('path'))}</code>"),
             ("run", f"<code>python {esc(str(repro.get('path') or 'repro.py').rsplit('/', 1)[-1])}</code>"
                     " (exit 1: reproduces, 0: does not)")]
    if repro.get("inputs"):
        pairs.append(("inputs", esc(repro["inputs"])))
    return f'<div class="card"><h3>Repro</h3>{_dl(pairs)}</div>'


LEGEND = (
    '<div class="legend">'
    '<span><svg width="12" height="12"><circle cx="6" cy="6" r="3.4" fill="#37474f"/></svg>compiled error</span>'
    '<span><svg width="12" height="12"><circle cx="6" cy="6" r="3.4" fill="#c62828"/></svg>compiled, failing</span>'
    '<span><svg width="12" height="12"><circle cx="6" cy="6" r="3.4" fill="none" stroke="#1565c0" stroke-width="1.3"/>'
    "</svg>eager's own error</span>"
    '<span><svg width="12" height="12"><path d="M6 1L11 11L1 11Z" fill="#c62828"/></svg>'
    '<svg width="12" height="12"><path d="M6 1L11 11L1 11Z" fill="none" stroke="#1565c0" stroke-width="1.3"/></svg>'
    "NaN/Inf output: compiled, eager</span>"
    '<span><svg width="14" height="12"><line x1="7" x2="7" y1="0" y2="12" stroke="#c62828" stroke-width="1.6" '
    'stroke-dasharray="4 2"/></svg>culprit</span>'
    '<span><svg width="14" height="12"><rect width="14" height="12" fill="#ffb74d" fill-opacity=".3"/></svg>'
    "nodes its error spreads to</span>"
    "<span>hover a node for details</span></div>"
)


def _profiles(report: dict[str, Any]) -> str:
    graphs = report.get("graphs") or []
    if not graphs:
        return '<section id="profile"><h2>Divergence profile</h2><p>No graph was judged.</p></section>'
    blocks = [_graph_block(graph, report, index) for index, graph in enumerate(graphs)]
    return f'<section id="profile"><h2>Divergence profile</h2>{"".join(blocks)}</section>'


def _graph_block(graph: dict[str, Any], report: dict[str, Any], index: int) -> str:
    rows = node_rows(graph, report)
    name = str(graph.get("name") or f"graph {index}")
    judged = sum(1 for r in rows if r.outcome)
    failing = sum(1 for r in rows if r.outcome == "mismatch")
    facts = [f"<b>{esc(name)}</b> ({esc(graph.get('kind'))})", f"{esc(graph.get('nodes'))} nodes, {len(rows)} values",
             f"whole graph: <b>{esc(graph.get('whole'))}</b>{_whole_by(graph)}",
             f'<b class="bad">{failing} value(s) fail</b>' if failing else "no value fails",
             "y: error in ulps of the output dtype against fp64 (log), x: values in graph order",
             f"per-node check: {esc(graph.get('checked_nodes'))} nodes in {esc(graph.get('compiled_node_copies'))}"
             f" compiled copies" if graph.get("checked_nodes") else "no per-node check (the whole graph matched)"]
    note = ""
    if rows and not graph.get("checked_nodes"):
        note = (f'<p class="graph-meta">Only the graph\'s {judged} output value(s) were judged (errors accumulated '
                "through the whole graph); per-node errors are measured when a graph diverges.</p>")
    problems = "".join(f'<p class="bad">{esc(words)}</p>' for words in _graph_problems(graph))
    svg = profile_svg(rows, f"divergence profile of {name}") or "<p>No tensor values in this graph.</p>"
    return (f'<div class="graph" id="graph-{index}"><p class="graph-meta">{" · ".join(facts)}</p>{note}{problems}'
            f"{svg}{LEGEND if rows else ''}{_node_table(rows, f'nodes-{index}') if rows else ''}</div>")


def _graph_problems(graph: dict[str, Any]) -> list[str]:
    problems = [f"whole graph: {graph['whole_error']}"] if graph.get("whole_error") else []
    if graph.get("node_check_error"):
        problems.append(f"per-node compile: {graph['node_check_error']}")
    problems += [f"{c.get('node')} crashes alone: {c.get('exception')}: {_first_line(c.get('message'))}"
                 for c in graph.get("crashed_nodes") or []]
    return problems


def _first_line(text: Any) -> str:
    lines = str(text or "").splitlines()
    return lines[0] if lines else ""


TABLE_HEAD = ("<thead><tr><th data-sort=\"num\">#</th><th data-sort=\"text\">value</th><th data-sort=\"text\">op</th>"
              "<th data-sort=\"text\">source</th>"
              "<th data-sort=\"num\" title=\"compiled error: ulps RMS against fp64\">compiled</th>"
              "<th data-sort=\"num\" title=\"eager's own error: ulps RMS against fp64\">eager</th>"
              "<th data-sort=\"num\" title=\"compiled error: largest, in ulps\">compiled max</th>"
              "<th data-sort=\"text\">verdict</th><th data-sort=\"num\">NaN/Inf</th><th data-sort=\"text\">shape</th>"
              "</tr></thead>")


def _node_table(rows: list[NodeRow], table_id: str) -> str:
    tools = (f'<div class="table-tools" data-table="{table_id}"><input type="search" '
             f'placeholder="filter: op, node, source, verdict..." aria-label="filter the nodes">'
             f'<label><input type="checkbox"> failing / non-finite only</label><span class="count">'
             f"{len(rows)} values</span></div>")
    body = "".join(_table_row(row) for row in rows)
    return f'{tools}<div class="table-wrap"><table id="{table_id}">{TABLE_HEAD}<tbody>{body}</tbody></table></div>'


def _number_cell(value: float | None) -> str:
    if value is None:
        return '<td class="num" data-v="-1"></td>'
    key = "Infinity" if value != value or value in (float("inf"), float("-inf")) else f"{value:.6g}"
    return f'<td class="num" data-v="{key}">{esc(ulps(value))}</td>'


def _table_row(row: NodeRow) -> str:
    role_class = f' class="r-{row.role.replace(" ", "-")}"' if row.role else ""
    failing = ' data-failing="1"' if row.failing else ""
    node = esc(row.node) if row.node == row.producer else f"{esc(row.node)} <small>({esc(row.producer)})</small>"
    if row.role:
        node += f' <span class="tag">{esc(row.role)}</span>'
    nonfinite = row.eager_nonfinite + row.compiled_nonfinite
    return (f"<tr{role_class}{failing}><td class=\"num\">{row.index}</td><td>{node}</td><td>{esc(row.op)}</td>"
            f"<td>{esc(row.source)}</td>{_number_cell(row.compiled)}{_number_cell(row.eager)}"
            f"{_number_cell(row.compiled_max)}<td>{esc(row.outcome or '-')}</td>"
            f"<td class=\"num\" data-v=\"{nonfinite}\">{f'{row.eager_nonfinite}/{row.compiled_nonfinite}' if nonfinite else ''}"
            f"</td><td>{esc(row.shape)}</td></tr>")


def _nan_section(nan: dict[str, Any] | None) -> str:
    if not nan:
        return ""
    made_by = nan.get("made_by")
    lead = ("The model makes NaN/Inf in eager too: a model issue, not a compiler bug." if made_by == "model"
            else "Only the compiled code makes NaN/Inf: eager stays finite.")
    sides = "".join(_nan_side(side, nan.get(side)) for side in ("eager", "compiled"))
    return f'<section id="nan"><h2>NaN/Inf forensics</h2><p><b>{esc(lead)}</b></p><div class="kv">{sides}</div></section>'


def _nan_side(side: str, origin: dict[str, Any] | None) -> str:
    if not origin:
        return f'<div class="card"><h3>first NaN/Inf in {esc(side)}</h3><p>none: stays finite</p></div>'
    pairs = [("op", f"<b>{esc(origin.get('op'))}</b>"), ("node", f"<code>{esc(origin.get('node'))}</code> "
                                                                    f"in {esc(origin.get('graph'))}"),
             ("source", f"<code>{esc(origin.get('source') or 'unknown')}</code>"),
             ("module", f"<code>{esc(origin.get('module') or '<top>')}</code>"),
             ("cause", esc(origin.get("cause"))), ("fix", esc(origin.get("fix")))]
    if origin.get("backward_of"):
        pairs.append(("backward", esc(origin["backward_of"])))
    inputs = origin.get("inputs") or []
    table = ""
    if inputs:
        keys = ["name", "dtype", "shape", "min", "max", "zeros", "negatives", "nan", "inf", "headroom"]
        head = "".join(f"<th>{esc(k)}</th>" for k in keys)
        body = "".join("<tr>" + "".join(f"<td>{esc(i.get(k))}</td>" for k in keys) + "</tr>" for i in inputs)
        table = f'<p>what it was fed:</p><div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
    return f'<div class="card"><h3>first NaN/Inf in {esc(side)}</h3>{_dl(pairs)}{table}</div>'


def _kernels_section(kernels: list[dict[str, Any]] | None) -> str:
    if not kernels:
        return ""
    blocks = []
    for index, kernel in enumerate(kernels):
        nodes = ", ".join(str(n) for n in kernel.get("nodes") or [])
        blocks.append(f"<details{' open' if index == 0 else ''}><summary><code>{esc(kernel.get('name'))}</code>"
                      f" (nodes: {esc(nodes or '?')})</summary>{_pre(str(kernel.get('source') or ''))}</details>")
    return f'<section id="kernels"><h2>Kernels of the culprit</h2>{"".join(blocks)}</section>'


def _repro_section(repro: dict[str, Any] | None, repro_text: str | None) -> str:
    if not repro:
        return ""
    runs = repro.get("runs") or []
    rows = "".join(f"<tr><td>{i + 1}</td><td>{esc(run.get('exit'))}</td><td>{esc(run.get('seconds'))}</td>"
                   f"<td>{esc(run.get('launch'))}</td></tr>" for i, run in enumerate(runs))
    table = (f'<div class="table-wrap"><table><thead><tr><th>run</th><th>exit</th><th>seconds</th><th>started as</th>'
             f"</tr></thead><tbody>{rows}</tbody></table></div>") if runs else "<p>not verified (--verify-runs 0)</p>"
    tail = _pre(str(runs[-1].get("output_tail") or "")) if runs and runs[-1].get("output_tail") else ""
    script = ""
    if repro_text is not None and len(repro_text) <= EMBED_REPRO_LIMIT:
        script = (f"<details><summary>the script ({len(repro_text):,} characters)</summary>"
                  f"<p>{_copy_button('repro-text', 'copy repro.py')}</p>{_pre(repro_text, 'repro-text')}</details>")
    elif repro_text is not None:
        script = f"<p>The script ({len(repro_text):,} characters) is too large to embed: open it from its path.</p>"
    return (f'<section id="repro"><h2>Repro: {esc(repro.get("status"))} {esc(repro.get("reproduced") or "")}</h2>'
            f"<p><code>{esc(repro.get('path'))}</code></p>{table}{tail}{script}</section>")


def _bug_report_section(bug_report: str | None) -> str:
    if not bug_report:
        return ""
    return (f'<section id="bug-report"><h2>Bug report</h2><p>A GitHub issue body in the shape of PyTorch\'s bug '
            f"template (also written as <code>bug_report.md</code>). {_copy_button('bug-report-text', 'copy issue body')}"
            f"</p><details><summary>show</summary>{_pre(bug_report, 'bug-report-text')}</details></section>")


def _script_section(script: dict[str, Any] | None) -> str:
    if not script:
        return ""
    first = script.get("first_divergence_call") or {}
    pairs = [("script", f"<code>{esc(script.get('path'))}</code> {esc(' '.join(map(str, script.get('argv') or [])))}"),
             ("level", f"{esc(script.get('level'))} ({esc(script.get('level_name'))})"),
             ("graphs", f"{esc(script.get('graphs_compiled'))} compiled, {esc(script.get('graphs_checked'))} checked"),
             ("calls", f"{esc(script.get('calls_checked'))} of {esc(script.get('calls'))} checked")]
    if first:
        explained = (" explained: a cast the compiled code skipped (see differences), not a divergence"
                     if first.get("explained_by") == "cast_elided" else "")
        pairs.append(("differed" if explained else "diverged",
                      f"{esc(first.get('graph'))} on its call {esc(first.get('graph_call'))} "
                      f"(program call {esc(first.get('call'))}){explained}"))
    if script.get("not_localised"):
        pairs.append(("not localised", esc(script["not_localised"])))
    return f'<section id="script"><h2>Script mode</h2>{_dl(pairs)}</section>'


def _stats_section(report: dict[str, Any]) -> str:
    stats = report.get("stats") or {}
    by_stage = stats.get("compiles_by_stage") or {}
    stages = ", ".join(f"{esc(stage)} {esc(count)}" for stage, count in by_stage.items()) or "none"
    pairs = [("compiles", f"{esc(stats.get('compiles'))} Inductor compiles ({stages})"),
             ("seconds", f"{esc(stats.get('seconds'))} s in all, {esc(stats.get('compile_seconds'))} s compiling"),
             ("graphs", f"{esc(stats.get('graphs_captured'))} captured")]
    if "repro_seconds" in stats:
        pairs.append(("repro", f"{esc(stats['repro_seconds'])} s verifying"))
    for key in ("budget", "model_level", "step"):
        if report.get(key) is not None:
            pairs.append((key.replace("_", " "), esc(report[key])))
    if isinstance(report.get("batch"), dict):
        batch = report["batch"]
        pairs.append(("batch", f"{esc(batch.get('index'))}, samples {esc(batch.get('samples'))}"))
    return f'<section id="stats"><h2>Stats</h2>{_dl(pairs)}</section>'


def _environment_section(environment: dict[str, Any] | None) -> str:
    pairs = [(str(k), f"<code>{esc(v)}</code>") for k, v in (environment or {}).items()]
    return f'<section id="environment"><h2>Environment</h2>{_dl(pairs) if pairs else "<p>unknown</p>"}</section>'
