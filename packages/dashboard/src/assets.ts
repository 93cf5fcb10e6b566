/**
 * The dashboard's stylesheet and script, shipped inside the package as strings (no CDN, no
 * build step for users). Served from `<base>/assets/…` with a content hash in the name, so the
 * Content-Security-Policy can forbid every inline script and style.
 */
import { createHash } from 'node:crypto';

export const CSS = `
:root{color-scheme:light dark;--bg:#f7f8fa;--panel:#fff;--fg:#1d2330;--muted:#667085;--line:#e3e6eb;
--accent:#2f6feb;--ok:#1a7f37;--warn:#9a6700;--bad:#cf222e;--info:#0969da;--violet:#8250df;
--chip:#eef1f5;--code:#f2f4f7;--mono:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
@media (prefers-color-scheme:dark){:root{--bg:#0e1116;--panel:#161b22;--fg:#e6edf3;--muted:#8b949e;
--line:#2b313a;--accent:#4493f8;--ok:#3fb950;--warn:#d29922;--bad:#f85149;--info:#58a6ff;--violet:#a371f7;
--chip:#21262d;--code:#0d1117}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
header.top{display:flex;align-items:center;gap:24px;padding:0 24px;height:52px;background:var(--panel);border-bottom:1px solid var(--line);position:sticky;top:0;z-index:2}
header.top .brand{font-weight:700;font-size:15px;color:var(--fg);display:flex;align-items:center;gap:8px}
header.top .brand .logo{display:inline-block;width:18px;height:18px;border-radius:5px;background:linear-gradient(135deg,var(--accent),var(--violet))}
nav.tabs{display:flex;gap:4px;height:100%}
nav.tabs a{display:flex;align-items:center;padding:0 12px;color:var(--muted);border-bottom:2px solid transparent;font-weight:500}
nav.tabs a:hover{color:var(--fg);text-decoration:none}
nav.tabs a.active{color:var(--fg);border-bottom-color:var(--accent)}
header.top .meta{margin-left:auto;display:flex;gap:10px;align-items:center;color:var(--muted);font-size:12px}
main{padding:20px 24px 48px;max-width:1400px;margin:0 auto}
h1{font-size:20px;margin:4px 0 16px}h2{font-size:15px;margin:0 0 10px}
.grid{display:grid;gap:16px}.grid.cols-4{grid-template-columns:repeat(auto-fit,minmax(180px,1fr))}
.grid.cols-2{grid-template-columns:repeat(auto-fit,minmax(420px,1fr))}
.card{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:16px;margin-bottom:16px;overflow:auto}
.stat .label{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.stat .value{font-size:26px;font-weight:650;margin-top:2px;font-variant-numeric:tabular-nums}
.stat .sub{color:var(--muted);font-size:12px}
table{width:100%;border-collapse:collapse;font-variant-numeric:tabular-nums}
th{text-align:left;font-weight:600;color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.03em;padding:8px 10px;border-bottom:1px solid var(--line);white-space:nowrap}
td{padding:7px 10px;border-bottom:1px solid var(--line);vertical-align:middle}
tr:last-child td{border-bottom:0}tbody tr:hover td{background:color-mix(in srgb,var(--accent) 5%,transparent)}
td.num,th.num{text-align:right}
td.err,td.mono,td .mono,td.wrap{overflow-wrap:anywhere;min-width:6ch}
td.id,time{white-space:nowrap}
.mono,code,pre{font-family:var(--mono);font-size:12.5px}
pre{background:var(--code);border:1px solid var(--line);border-radius:6px;padding:12px;overflow:auto;max-height:480px;margin:0;white-space:pre-wrap;word-break:break-word}
.muted{color:var(--muted)}.small{font-size:12px}
.badge{display:inline-block;padding:1px 8px;border-radius:999px;font-size:12px;font-weight:600;border:1px solid transparent;white-space:nowrap}
.badge.timer{color:var(--violet);border-color:color-mix(in srgb,var(--violet) 40%,transparent);background:color-mix(in srgb,var(--violet) 10%,transparent)}
.badge.async{color:var(--info);border-color:color-mix(in srgb,var(--info) 40%,transparent);background:color-mix(in srgb,var(--info) 10%,transparent)}
.badge.blocked{color:var(--info);border:1px dashed color-mix(in srgb,var(--info) 50%,transparent);background:transparent}
.badge.running{color:var(--warn);border-color:color-mix(in srgb,var(--warn) 40%,transparent);background:color-mix(in srgb,var(--warn) 12%,transparent)}
.badge.deadletter,.badge.cancelled,.badge.failed,.badge.bad{color:var(--bad);border-color:color-mix(in srgb,var(--bad) 40%,transparent);background:color-mix(in srgb,var(--bad) 10%,transparent)}
.badge.suspended,.badge.paused,.badge.skipped,.badge.pending,.badge.unknown,.badge.neutral{color:var(--muted);border-color:var(--line);background:var(--chip)}
.badge.completed,.badge.active,.badge.ok{color:var(--ok);border-color:color-mix(in srgb,var(--ok) 40%,transparent);background:color-mix(in srgb,var(--ok) 10%,transparent)}
form.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:flex-end;margin-bottom:12px}
form.filters label{display:flex;flex-direction:column;gap:3px;font-size:12px;color:var(--muted)}
input,select,button{font:inherit;color:var(--fg);background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:0 10px;height:32px}
input[type=checkbox]{min-width:0;height:auto;margin:0 4px 0 0;vertical-align:middle}
form.filters a{align-self:flex-end;line-height:32px;padding:0 4px}
input{min-width:120px}input:focus,select:focus{outline:2px solid color-mix(in srgb,var(--accent) 50%,transparent);border-color:var(--accent)}
button,.button{cursor:pointer;font-weight:550;display:inline-block}
button:hover{border-color:var(--muted)}
button.primary{background:var(--accent);border-color:var(--accent);color:#fff}
button.danger{color:var(--bad);border-color:color-mix(in srgb,var(--bad) 45%,transparent)}
button.danger:hover{background:var(--bad);color:#fff}
.actions{display:flex;flex-wrap:wrap;gap:8px;align-items:center}.actions form{margin:0}
.page-actions{margin-bottom:16px}
h1 + .actions{margin-bottom:16px}
.head{display:flex;align-items:center;gap:16px;margin-bottom:12px}.head h1{margin:4px 0}
.pager{display:flex;gap:12px;align-items:center;justify-content:space-between;margin-top:12px;color:var(--muted)}
.pager .links{display:flex;gap:8px}
.pager a,.pager span.off{padding:4px 10px;border:1px solid var(--line);border-radius:6px;background:var(--panel)}
.pager span.off{opacity:.45}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:6px 18px;margin:0}
dl.kv dt{color:var(--muted)}dl.kv dd{margin:0;word-break:break-all}
.notice{border-radius:8px;padding:10px 14px;margin-bottom:16px;border:1px solid var(--line);background:var(--panel)}
.notice p{margin:0 0 8px}.notice p:last-child{margin:0}
.notice.ok{border-color:color-mix(in srgb,var(--ok) 45%,transparent)}
.notice.bad{border-color:color-mix(in srgb,var(--bad) 45%,transparent)}
.notice.warn{border-color:color-mix(in srgb,var(--warn) 45%,transparent)}
ol.timeline{list-style:none;margin:0;padding:0 0 0 14px;border-left:2px solid var(--line)}
ol.timeline li{position:relative;padding:0 0 12px 10px}ol.timeline li:last-child{padding-bottom:2px}
ol.timeline li::before{content:"";position:absolute;left:-20px;top:5px;width:10px;height:10px;border-radius:50%;background:var(--accent)}
ol.timeline li.bad::before{background:var(--bad)}ol.timeline li.ok::before{background:var(--ok)}
svg.chart{width:100%;height:auto;max-height:220px;display:block}
svg.chart .grid{stroke:var(--line)}svg.chart text{fill:var(--muted);font-size:11px}
svg.chart rect.started{fill:var(--info)}svg.chart rect.completed{fill:var(--ok)}svg.chart rect.failed{fill:var(--bad)}
svg.chart text.empty{font-size:13px}
.legend{display:flex;gap:14px;font-size:12px;color:var(--muted)}
.legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.legend i.started{background:var(--info)}.legend i.completed{background:var(--ok)}.legend i.failed{background:var(--bad)}
.graph-wrap{overflow-x:auto;margin-bottom:8px}
svg.flow-graph{display:block;max-width:none}svg.flow-graph text{font-size:12px;fill:var(--fg)}
svg.flow-graph text.state{fill:var(--muted);font-size:11px}svg.flow-graph .name{font-weight:600}
svg.flow-graph path.edge{fill:none;stroke:var(--muted);stroke-width:1.5}svg.flow-graph path.arrow{fill:var(--muted)}
svg.flow-graph rect{stroke-width:1.5;fill:var(--panel);stroke:var(--line)}
svg.flow-graph a:hover rect{stroke-width:2.5}svg.flow-graph .current rect{stroke-width:3.5}
svg.flow-graph .waiting rect{stroke:var(--info);fill:color-mix(in srgb,var(--info) 8%,var(--panel))}
svg.flow-graph .running rect{stroke:var(--warn);fill:color-mix(in srgb,var(--warn) 14%,var(--panel))}
svg.flow-graph .completed rect{stroke:var(--ok);fill:color-mix(in srgb,var(--ok) 12%,var(--panel))}
svg.flow-graph .deadletter rect{stroke:var(--bad);fill:color-mix(in srgb,var(--bad) 14%,var(--panel))}
svg.flow-graph .cancelled rect{stroke:var(--bad);stroke-dasharray:5 3;fill:var(--panel)}
svg.flow-graph .skipped rect{stroke:var(--muted);stroke-dasharray:2 3;fill:var(--chip)}
.legend i.node-waiting{background:var(--info)}.legend i.node-running{background:var(--warn)}.legend i.node-completed{background:var(--ok)}
.legend i.node-deadletter{background:var(--bad)}.legend i.node-cancelled{border:1px dashed var(--bad)}.legend i.node-skipped{background:var(--chip);border:1px dashed var(--muted)}
progress{width:140px;height:10px;vertical-align:middle;accent-color:var(--accent)}
.err{color:var(--bad)}
.count-pill{display:inline-block;min-width:24px;text-align:center;padding:0 7px;border-radius:999px;background:var(--chip);font-size:12px;font-weight:600;margin-left:6px}
`;

/** Confirmation before actions, and the overview's auto-refresh. */
export const JS = `
document.addEventListener('submit', function (e) {
  var form = e.target, text = form.getAttribute('data-confirm');
  if (text && !window.confirm(text)) e.preventDefault();
});
(function () {
  var box = document.getElementById('auto-refresh');
  if (!box) return;
  var key = 'jobs-dashboard-refresh';
  box.checked = localStorage.getItem(key) === '1';
  box.addEventListener('change', function () { localStorage.setItem(key, box.checked ? '1' : '0'); });
  setInterval(function () { if (box.checked && !document.hidden) location.reload(); }, 5000);
})();
`;

const hash = (text: string): string => createHash('sha256').update(text).digest('hex').slice(0, 10);

export const CSS_FILE = `app-${hash(CSS)}.css`;
export const JS_FILE = `app-${hash(JS)}.js`;

/**
 * Asset file names (content-hashed: cached for a year). A Map: a name from the URL is looked up
 * among these entries only, so `/assets/__proto__` is as unknown as any other name.
 */
export const ASSETS: ReadonlyMap<string, { body: string; type: string }> = new Map([
  [CSS_FILE, { body: CSS, type: 'text/css; charset=utf-8' }],
  [JS_FILE, { body: JS, type: 'text/javascript; charset=utf-8' }],
]);
