"""The inline style sheet and script of ``report.html`` (no CDN, nothing fetched: it opens from
``file://`` on a machine without network).

The script is small vanilla JavaScript: sorting and filtering the node tables, copy buttons. The
page reads fully without it; once it has run it marks ``<html data-js="ready">``.
"""
from __future__ import annotations

STYLE = """
:root{--red:#c62828;--red-bg:#fdecea;--green:#2e7d32;--green-bg:#e8f5e9;--amber:#b26a00;--amber-bg:#fff4e0;
--grey:#555;--grey-bg:#f1f3f4;--blue:#1565c0;--line:#d7dbe0;--ink:#1b1f23;--muted:#5f6368}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--ink);background:#fafbfc}
main{max-width:1240px;margin:0 auto;padding:12px 20px 40px}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;font-size:12.5px}
pre{background:#f6f8fa;border:1px solid var(--line);border-radius:6px;padding:8px 10px;overflow:auto;max-height:420px;margin:6px 0;white-space:pre}
h1{font-size:21px;margin:2px 0 4px;line-height:1.3}
h2{font-size:16px;margin:18px 0 6px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:13px;margin:0 0 6px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted)}
a{color:var(--blue)}
.answer{border-radius:8px;padding:8px 16px;border-left:6px solid var(--grey);background:var(--grey-bg)}
.answer p{margin:2px 0}
.answer .meta{color:var(--muted);font-size:12.5px}
.v-bad{border-color:var(--red);background:var(--red-bg)}
.v-good{border-color:var(--green);background:var(--green-bg)}
.v-warn{border-color:var(--amber);background:var(--amber-bg)}
.badge{display:inline-block;font-weight:700;font-size:12px;letter-spacing:.06em;padding:2px 8px;border-radius:4px;color:#fff;background:var(--grey);vertical-align:middle}
.v-bad .badge{background:var(--red)}.v-good .badge{background:var(--green)}.v-warn .badge{background:var(--amber)}
nav{font-size:12.5px;margin:2px 0 0;color:var(--muted)}
nav a{margin-right:10px}
.cards{display:grid;grid-template-columns:1.25fr 1fr 1fr;gap:10px;margin-top:10px}
@media (max-width:900px){.cards{grid-template-columns:1fr}}
.card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:8px 12px;min-width:0}
.card p{margin:4px 0}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}
dt{color:var(--muted)}dd{margin:0;overflow-wrap:anywhere}
.big{font-size:18px;font-weight:700}
.bad{color:var(--red)}.good{color:var(--green)}.warn{color:var(--amber)}
.crash pre{border-color:var(--red);background:var(--red-bg)}
.card pre{white-space:pre-wrap;overflow-wrap:break-word;max-height:150px;font-size:11.5px}
.tag{display:inline-block;font-size:11px;padding:0 5px;border-radius:3px;background:#eceff1;color:var(--muted);font-weight:600}
tr.r-culprit .tag,tr.r-crash .tag{background:var(--red);color:#fff}
.profile{width:100%;height:auto;display:block;background:#fff;border:1px solid var(--line);border-radius:6px}
.profile .grid{stroke:#e3e6ea;stroke-width:1}
.profile .band{stroke:#c5cad0;stroke-width:1;stroke-dasharray:3 3}
.profile .tick{font-size:11px;fill:var(--muted)}
.profile .axis-label{font-size:11px;fill:var(--muted)}
.profile .spread{fill:#ffb74d;fill-opacity:.22}
.profile .mark-culprit{stroke:var(--red);stroke-width:1.6;stroke-dasharray:5 3}
.profile .mark-origin{stroke:#8e24aa;stroke-width:1.4;stroke-dasharray:2 2}
.profile .mark-label{font-size:11.5px;font-weight:700;fill:var(--red)}
.profile .eager circle{fill:none;stroke:var(--blue);stroke-width:1.3}
.profile .compiled circle{fill:#37474f;fill-opacity:.75}
.profile .failing circle{fill:var(--red)}
.profile .nonfinite-compiled{fill:var(--red)}
.profile .nonfinite-eager{fill:none;stroke:var(--blue);stroke-width:1.3}
.profile .hover rect{fill:#000;fill-opacity:0}
.profile .hover rect:hover{fill-opacity:.07}
.legend{font-size:12px;color:var(--muted);margin:4px 0 6px;display:flex;flex-wrap:wrap;gap:4px 16px;align-items:center}
.legend svg{vertical-align:middle;margin-right:4px}
.graph-meta{font-size:12.5px;color:var(--muted);margin:0 0 4px}
.table-tools{display:flex;gap:12px;align-items:center;margin:8px 0 4px;font-size:12.5px}
.table-tools input[type=search]{padding:4px 8px;border:1px solid var(--line);border-radius:4px;width:280px}
.table-wrap{max-height:440px;overflow:auto;border:1px solid var(--line);border-radius:6px;background:#fff}
table{border-collapse:collapse;width:100%;font-size:12px}
th,td{padding:2px 7px;text-align:left;border-bottom:1px solid #eef0f2;white-space:nowrap}
th{position:sticky;top:0;background:#f6f8fa;z-index:1}
th[data-sort]{cursor:pointer;user-select:none}
th[data-sort]:after{content:" \\2195";color:#b0b5ba}
th[data-dir=asc]:after{content:" \\25B2";color:var(--ink)}th[data-dir=desc]:after{content:" \\25BC";color:var(--ink)}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.r-culprit td,tr.r-crash td{background:var(--red-bg);font-weight:600}
tr.r-propagator td{background:#fff7eb}
tr.r-nan-origin td{background:#f5e9f7}
.kv{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:10px}
button.copy{font-size:12px;padding:2px 10px;border:1px solid var(--line);border-radius:4px;background:#fff;cursor:pointer}
button.copy:hover{background:#f0f2f4}
details summary{cursor:pointer;color:var(--blue)}
footer{margin-top:28px;color:var(--muted);font-size:12px}
"""

SCRIPT = """
(function(){
  function key(cell, numeric){
    var v = cell.getAttribute('data-v');
    if (numeric) { var n = parseFloat(v === null ? cell.textContent : v); return isNaN(n) ? -Infinity : n; }
    return (v === null ? cell.textContent : v).toLowerCase();
  }
  function sortBy(th){
    var table = th.closest('table'), body = table.tBodies[0], col = th.cellIndex;
    var numeric = th.getAttribute('data-sort') === 'num';
    var dir = th.getAttribute('data-dir') === 'desc' ? 'asc' : (th.getAttribute('data-dir') === 'asc' ? 'desc' : (numeric ? 'desc' : 'asc'));
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function(c){ c.removeAttribute('data-dir'); });
    th.setAttribute('data-dir', dir);
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function(a, b){
      var x = key(a.cells[col], numeric), y = key(b.cells[col], numeric);
      var order = x < y ? -1 : (x > y ? 1 : 0);
      return dir === 'asc' ? order : -order;
    });
    rows.forEach(function(r){ body.appendChild(r); });
  }
  function filter(tools){
    var table = document.getElementById(tools.getAttribute('data-table'));
    var words = tools.querySelector('input[type=search]').value.toLowerCase().split(/\\s+/).filter(Boolean);
    var onlyFailing = tools.querySelector('input[type=checkbox]').checked, shown = 0;
    Array.prototype.forEach.call(table.tBodies[0].rows, function(r){
      var text = r.textContent.toLowerCase();
      var show = words.every(function(w){ return text.indexOf(w) >= 0; }) && (!onlyFailing || r.getAttribute('data-failing') === '1');
      r.hidden = !show; if (show) shown++;
    });
    tools.querySelector('.count').textContent = shown + ' of ' + table.tBodies[0].rows.length + ' values';
  }
  function copy(button){
    var source = document.getElementById(button.getAttribute('data-copy'));
    var words = source.textContent, done = function(){ button.textContent = 'copied'; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(words).then(done, function(){ fallback(source); done(); });
    } else { fallback(source); done(); }
  }
  function fallback(source){
    var range = document.createRange(); range.selectNodeContents(source);
    var selection = window.getSelection(); selection.removeAllRanges(); selection.addRange(range);
    try { document.execCommand('copy'); } catch (e) {}
  }
  document.querySelectorAll('th[data-sort]').forEach(function(th){ th.addEventListener('click', function(){ sortBy(th); }); });
  document.querySelectorAll('.table-tools').forEach(function(tools){
    tools.querySelectorAll('input').forEach(function(i){ i.addEventListener('input', function(){ filter(tools); }); });
    filter(tools);
  });
  document.querySelectorAll('button.copy').forEach(function(b){ b.addEventListener('click', function(){ copy(b); }); });
  document.documentElement.setAttribute('data-js', 'ready');
})();
"""
