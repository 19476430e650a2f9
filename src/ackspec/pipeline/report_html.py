"""The report as one self-contained HTML page: inline CSS, JS, data and images; no network.

The matrix (requirement x target, coloured by verdict) is rendered server-side so
the page reads without JavaScript; the script adds filtering and the drill-down
panel (rule text, source, tests, seeds, failing operations, history anomalies,
verdict timeline) from the JSON embedded in the page.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import defaultdict
from typing import Any

COLOURS = {
    "pass": "#2e7d32", "fail": "#c62828", "deviation": "#ef8f00", "stale": "#8e24aa",
    "not-applicable": "#9e9e9e", "indeterminate": "#1565c0", "error": "#4e342e",
}

CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#263238;color:#fff;padding:12px 20px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#cfd8dc}main{padding:12px 20px}section{margin:18px 0}
h2{font-size:17px;border-bottom:1px solid #ccc;padding-bottom:4px}
table{border-collapse:collapse;background:#fff}th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;
vertical-align:top}th{background:#eceff1;position:sticky;top:0}
td.v{color:#fff;text-align:center;font-weight:600;cursor:pointer;min-width:90px}
tr.req:hover td{outline:1px solid #90a4ae}.muted{color:#777}.lvl{font-size:11px;color:#555}
#panel{position:fixed;right:0;top:0;bottom:0;width:44%;overflow:auto;background:#fff;border-left:3px solid
#263238;padding:12px 16px;display:none;box-shadow:-4px 0 12px rgba(0,0,0,.2)}
#panel.open{display:block}#panel pre{white-space:pre-wrap;background:#f5f5f5;padding:6px}
.legend span{display:inline-block;color:#fff;padding:2px 8px;margin:2px;border-radius:3px}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{background:#fff;border:1px solid #ddd;padding:8px 12px;
border-radius:4px}.card small{display:block;max-width:260px;color:#555}
.interrupted{background:#fff3e0;border:2px solid #e65100;padding:8px 12px}
.card b{font-size:20px;display:block}input#filter{padding:4px 8px;width:320px}
img.plot{max-width:640px;border:1px solid #ddd;background:#fff;margin:4px}
button.close{float:right}
"""

JS = r"""
(function(){
  'use strict';
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var byKey = {};
  data.cells.forEach(function(c){ byKey[c.requirement + '\u0000' + c.target] = c; });
  var panel = document.getElementById('panel');
  function el(tag, text){ var e = document.createElement(tag); if (text !== undefined) e.textContent = text; return e; }
  function show(rid){
    var req = data.requirements[rid] || {id: rid, title: '', rule: '', source: '', level: '', family: ''};
    panel.innerHTML = '';
    var close = el('button', 'close'); close.className = 'close';
    close.addEventListener('click', function(){ panel.className = ''; });
    panel.appendChild(close);
    panel.appendChild(el('h2', rid));
    panel.appendChild(el('p', req.title));
    var meta = el('p', [req.level, req.family, req.role].filter(Boolean).join(' \u00b7 '));
    meta.className = 'muted'; panel.appendChild(meta);
    panel.appendChild(el('pre', req.rule || '(no rule text: not in the catalogue)'));
    panel.appendChild(el('p', 'Source: ' + (req.source || 'unknown')));
    data.targets.forEach(function(target){
      var cell = byKey[rid + '\u0000' + target];
      if (!cell) return;
      panel.appendChild(el('h3', target + ': ' + cell.verdict));
      panel.appendChild(el('p', 'last run ' + cell.last_run + ' (' + cell.last_started + '), seed ' +
        (cell.seed === null ? '-' : cell.seed) + ', code ' + (cell.code_version || '-')));
      if (cell.note) panel.appendChild(el('p', cell.note));
      var ul = el('ul');
      cell.tests.forEach(function(t){
        var li = el('li', t.verdict + ' \u2014 ' + t.test + (t.seed !== null ? ' (seed ' + t.seed + ')' : ''));
        if (t.message) { li.appendChild(el('pre', t.message)); }
        if (t.operations.length) { li.appendChild(el('div', 'operations: ' + t.operations.join(', ') +
          (t.history ? ' in ' + t.history : ''))); }
        ul.appendChild(li);
      });
      panel.appendChild(ul);
      if (cell.failing_operations.length) {
        panel.appendChild(el('p', 'Failing operations (history indexes): ' + cell.failing_operations.join(', ')));
      }
      if (cell.anomalies.length) {
        panel.appendChild(el('p', 'History anomalies:'));
        var al = el('ul');
        cell.anomalies.slice(0, 200).forEach(function(a){
          al.appendChild(el('li', a.kind + ' \u2014 ' + a.test + ' ' + (a.destination || '') + ' producer ' +
            (a.producer || '-') + ' seq ' + a.seq + ': operations ' + a.operations.join(', ') +
            (a.verdict ? ' [' + a.verdict + ': ' + a.reason + ']' : (a.reason ? ' [' + a.reason + ']' : ''))));
        });
        panel.appendChild(al);
      }
      if (cell.timeline.length > 1) {
        panel.appendChild(el('p', 'Timeline: ' + cell.timeline.map(function(t){
          return t.started + ' ' + t.verdict; }).join(' \u2192 ')));
      }
    });
    panel.className = 'open';
  }
  Array.prototype.forEach.call(document.querySelectorAll('tr.req'), function(row){
    row.addEventListener('click', function(){ show(row.getAttribute('data-req')); });
  });
  var filter = document.getElementById('filter');
  filter.addEventListener('input', function(){
    var q = filter.value.toLowerCase();
    Array.prototype.forEach.call(document.querySelectorAll('tr.req'), function(row){
      row.style.display = row.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
    });
  });
  function fromHash(){
    var m = /^#req=(.+)$/.exec(window.location.hash);
    if (m) show(decodeURIComponent(m[1]));
  }
  window.addEventListener('hashchange', fromHash);
  fromHash();
  document.body.setAttribute('data-ready', 'true');
})();
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def plots(figures: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(title, data URI of a PNG) per figure name; empty when matplotlib is missing."""
    if not figures:
        return []
    try:
        import matplotlib  # noqa: PLC0415 - heavy, and only needed when there are figures

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:  # pragma: no cover - matplotlib is a dependency
        return []
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for figure in figures:
        grouped[str(figure.get("name", "figure"))].append(figure)
    out = []
    for name, series in grouped.items():
        fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
        for s in series:
            ax.plot(s["x"], s["y"], marker="o", label=str(s.get("series") or s.get("run", "")))
        ax.set_title(name)
        ax.set_xlabel(str(series[0].get("x_label", "")))
        ax.set_ylabel(str(series[0].get("unit", "")))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        buffer = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buffer, format="png")
        plt.close(fig)
        out.append((name, "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")))
    return out


INDETERMINATE_SENDS = ("sends with no confirmation either way: sent without asking for a receipt (fire-and-forget, "
                       "pre-settled) or cut off before the answer; never counted as lost or ok, not a failure")


def interrupted_banner(runs: list[dict[str, Any]]) -> str:
    """A warning above everything when a run was cut short: its verdicts are partial, never conformant."""
    cut = [r for r in runs if r.get("interrupted")]
    if not cut:
        return ""
    names = ", ".join(f"{r['run']} ({r['target']})" for r in cut)
    return (f'<section class="interrupted"><h2>Interrupted: partial results</h2><p>{len(cut)} run(s) were '
            f"interrupted (Ctrl-C) before every test ran: {_e(names)}. Their verdicts are partial and do not "
            "show conformance.</p></section>")


def render_html(data: dict[str, Any]) -> str:
    targets: list[str] = data["targets"]
    cells = {(c["requirement"], c["target"]): c for c in data["cells"]}
    requirements = sorted({c["requirement"] for c in data["cells"]},
                          key=lambda r: (data["requirements"].get(r, {}).get("family", ""), r))
    counts: dict[str, int] = defaultdict(int)
    for cell in data["cells"]:
        counts[cell["verdict"]] += 1
    rows = []
    for rid in requirements:
        req = data["requirements"].get(rid, {})
        tds = []
        for target in targets:
            cell = cells.get((rid, target))
            if cell is None:
                tds.append('<td class="muted">not run</td>')
                continue
            colour = COLOURS.get(cell["verdict"], "#607d8b")
            extra = f" +{len(cell['anomalies'])}a" if cell["anomalies"] else ""
            tds.append(f'<td class="v" style="background:{colour}" title="{_e(cell["last_run"])}">'
                       f'{_e(cell["verdict"])}{_e(extra)}</td>')
        rows.append(f'<tr class="req" data-req="{_e(rid)}"><td><b>{_e(rid)}</b><br>'
                    f'<span class="lvl">{_e(req.get("level", ""))} · {_e(req.get("family", ""))}</span></td>'
                    f'<td>{_e(req.get("title", ""))}</td>{"".join(tds)}</tr>')
    cov = data["coverage"]
    titles = cov.get("titles", {})

    def id_list(ids: list[str], limit: int = 400) -> str:
        if not ids:
            return "<p class='muted'>none</p>"
        items = "".join(f"<li><code>{_e(i)}</code> {_e(titles.get(i, ''))}</li>" for i in ids[:limit])
        more = f"<li class='muted'>... and {len(ids) - limit} more</li>" if len(ids) > limit else ""
        return f"<ul>{items}{more}</ul>"

    never = "".join(f"<h3>{_e(t)} ({len(ids)})</h3><details><summary>show</summary>{id_list(ids)}</details>"
                    for t, ids in cov["never_run_against_target"].items())
    history_rows = "".join(
        f"<tr><td>{_e(h['requirement'])}</td><td>{_e(h['target'])}</td><td>{_e(c['started'])}</td>"
        f"<td>{_e(c['from'])} → {_e(c['to'])}</td><td>{_e(c['code_version'])}</td></tr>"
        for h in data["history"] for c in h["changes"])
    flaky_rows = "".join(f"<tr><td>{_e(f['requirement'])}</td><td>{_e(f['target'])}</td>"
                         f"<td>{_e(f['code_version'])}</td></tr>" for f in data["flaky"])
    runs_rows = "".join(f"<tr><td>{_e(r['run'])}{' (interrupted)' if r.get('interrupted') else ''}</td>"
                        f"<td>{_e(r['started'])}</td><td>{_e(r['target'])}</td>"
                        f"<td>{_e(r['url'])}</td><td>{_e(r['code_version'])}</td><td>{_e(r['seed'])}</td>"
                        f"<td>{r['tests']}</td></tr>" for r in data["runs"])
    kinds: dict[str, int] = defaultdict(int)
    for anomaly in data["anomalies"]:
        kinds[anomaly["kind"]] += 1
    anomaly_rows = "".join(f"<tr><td>{_e(k)}</td><td>{n}</td></tr>" for k, n in sorted(kinds.items()))
    sends = data.get("sends", {})
    images = "".join(f'<img class="plot" alt="{_e(title)}" src="{uri}">' for title, uri in plots(data["figures"]))
    legend = "".join(f'<span style="background:{c}">{_e(v)}</span>' for v, c in COLOURS.items())
    cards = "".join(f'<div class="card"><b>{n}</b>{_e(v)}</div>' for v, n in sorted(counts.items()))
    payload = json.dumps({k: data[k] for k in ("requirements", "cells", "targets")}, default=str)
    payload = payload.replace("</", "<\\/").replace("<!--", "<\\!--")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ackspec traceability report</title>
<style>{CSS}</style></head>
<body>
<header><h1>ackspec traceability report</h1>
<p>{len(data['runs'])} run(s) · {len(targets)} target(s) · {len(requirements)} requirement(s) tested ·
catalogue of {cov.get('catalogue_size', 0)} · generated {_e(data['generated'])}</p></header>
<main>{interrupted_banner(data['runs'])}
<section><div class="cards">{cards}<div class="card"><b>{len(data['anomalies'])}</b>history anomalies</div>
<div class="card" title="{_e(INDETERMINATE_SENDS)}"><b>{sends.get('indeterminate', 0)}</b>indeterminate sends
<small>{_e(INDETERMINATE_SENDS)}</small></div></div>
<p class="legend">{legend}</p></section>
<section id="matrix"><h2>Requirement &times; target</h2>
<p><input id="filter" type="search" placeholder="filter requirements"> <span class="muted">click a row for
the rule, its source, the tests, seeds and failing operations</span></p>
<table><thead><tr><th>Requirement</th><th>Title</th>{"".join(f"<th>{_e(t)}</th>" for t in targets)}</tr></thead>
<tbody>{"".join(rows)}</tbody></table></section>
<section id="coverage"><h2>Coverage</h2>
<h3>MUST/SHOULD requirements with no test ({len(cov['normative_without_test'])})</h3>
<details><summary>show</summary>{id_list(cov['normative_without_test'])}</details>
<h3>Cited by a test but not run in these runs ({len(cov['cited_but_never_run'])})</h3>
<details><summary>show</summary>{id_list(cov['cited_but_never_run'])}</details>
<h3>Tests citing no requirement ({len(cov['tests_without_requirement'])})</h3>
<details><summary>show</summary>{id_list(cov['tests_without_requirement'])}</details>
<h3>Requirements cited by results but unknown to the catalogue ({len(cov['unknown_requirements'])})</h3>
{id_list(cov['unknown_requirements'])}
<h3>Requirements never run against a target</h3>{never}</section>
<section id="history"><h2>History over runs</h2>
<table><thead><tr><th>Requirement</th><th>Target</th><th>When</th><th>Change</th><th>Code</th></tr></thead>
<tbody>{history_rows or '<tr><td colspan="5" class="muted">no verdict changed</td></tr>'}</tbody></table>
<h3>Flaky (pass and fail at the same code version)</h3>
<table><thead><tr><th>Requirement</th><th>Target</th><th>Code</th></tr></thead>
<tbody>{flaky_rows or '<tr><td colspan="3" class="muted">none</td></tr>'}</tbody></table></section>
<section id="anomalies"><h2>History checks</h2>
<p>Engine: {_e(data.get('engine', ''))}. Sends: {sends.get('confirmed', 0)} confirmed, {sends.get('failed', 0)}
failed, {sends.get('indeterminate', 0)} indeterminate (neither lost nor ok).</p>
<table><thead><tr><th>Anomaly</th><th>Count</th></tr></thead>
<tbody>{anomaly_rows or '<tr><td colspan="2" class="muted">none</td></tr>'}</tbody></table></section>
<section id="benchmarks"><h2>Benchmarks</h2>{images or '<p class="muted">no bench.json figures</p>'}</section>
<section id="runs"><h2>Runs</h2><table><thead><tr><th>Run</th><th>Started</th><th>Target</th><th>URL</th>
<th>Code</th><th>Seed</th><th>Results</th></tr></thead><tbody>{runs_rows}</tbody></table></section>
</main>
<aside id="panel"></aside>
<script type="application/json" id="report-data">{payload}</script>
<script>{JS}</script>
</body></html>
"""
