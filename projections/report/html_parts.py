"""The HTML view's fixed parts and its value helpers.

Part of ``projections.report.html``: the page's style and scripts (the ``/3`` view's
too) with the Content-Security-Policy that names the scripts' hashes, the radar's
palette and geometry constants, and how a value is escaped (``_e``), shown as text
(``_plain``), rounded (``_q``), a hash folded (``_hash``), Markdown code spans made
``<code>`` (``_md``) and a cell recognised as a number (``_is_number``).
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from decimal import Decimal
from typing import Any

_PALETTE = ("#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0a7c86")
_CENTER, _RADIUS = Decimal(190), Decimal(110)
_PLACES = Decimal("0.01")
_PI = Decimal("3.14159265358979323846264338327950288")

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1f2328}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px}p,li,dd,h2,h3,h4,figcaption{overflow-wrap:anywhere}
.scroll{overflow-x:auto;max-width:100%;margin:8px 0 4px}
table{border-collapse:collapse}
th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f6f8fa}th[title]{text-decoration:underline dotted;cursor:help}
td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f6f8fa;padding:8px;overflow:auto;white-space:pre-wrap;
overflow-wrap:anywhere;max-height:360px}
details{margin:4px 0 14px}summary{cursor:pointer}.defs{font-size:12px;color:#656d76}
.defs dl{margin:4px 0}.defs dt{font-weight:600;display:inline}
.defs dt::after{content:": "}.defs dd{display:inline;margin:0}.defs dd::after{content:"";
display:block}.ok{color:#1a7f37}.bad{color:#d1242f}.muted{color:#656d76}
.notice{padding:6px 10px;border:1px solid #d0d7de;background:#fff8c5}
.radar{display:inline-block;margin:0 12px 12px 0;text-align:center;max-width:100%}
.radar svg{max-width:100%;height:auto}
button.cr{font:inherit;padding:0 6px;cursor:pointer}
tr.evidence>td{background:#fff}
.ev{position:sticky;left:0;max-width:calc(100vw - 64px)}
@media (max-width:600px){body{margin:10px}.ev{max-width:calc(100vw - 36px)}}
"""

# The one script of the page: draws a CaseRun's evidence from the JSON blob when its row
# is opened. A block is ["h", text] (heading), ["p", text, class?], ["pre", text] or
# ["t", head index, rows]; a text is a string, an index into D.s, or a list of those
# joined by blank lines (a prompt split into its shared paragraphs).
_SCRIPT = """(function(){
var D=JSON.parse(document.getElementById('evidence').textContent);
function T(v){if(typeof v==='number')return D.s[v];
if(Array.isArray(v))return v.map(T).join('\\n\\n');return v}
function E(t,c,x){var e=document.createElement(t);if(c)e.className=c;
if(x!=null)e.textContent=x;return e}
function fill(p,blocks){blocks.forEach(function(b){var k=b[0];
if(k==='h')p.appendChild(E('h4',null,T(b[1])));
else if(k==='p')p.appendChild(E('p',b[2]||null,T(b[1])));
else if(k==='pre')p.appendChild(E('pre',null,T(b[1])));
else{var w=E('div','scroll'),t=E('table'),h=E('tr'),y=E('tbody');
D.h[b[1]].forEach(function(x){h.appendChild(E('th',null,T(x)))});
t.appendChild(E('thead')).appendChild(h);
b[2].forEach(function(r){var tr=E('tr');
r.forEach(function(x){tr.appendChild(E('td',null,T(x)))});y.appendChild(tr)});
t.appendChild(y);w.appendChild(t);p.appendChild(w)}})}
document.addEventListener('click',function(ev){var b=ev.target.closest('button.cr');if(!b)return;
var row=b.closest('tr'),n=row.nextElementSibling;
if(n&&n.className==='evidence'){n.hidden=!n.hidden}
else{n=E('tr','evidence');var td=E('td'),d=E('div','ev');td.colSpan=row.children.length;
fill(d,D.c[+b.getAttribute('data-cr')]);td.appendChild(d);n.appendChild(td);row.after(n)}
b.setAttribute('aria-expanded',n.hidden?'false':'true');b.textContent=n.hidden?'show':'hide'});
})();"""

# Issue 35 (caseledger-report/3 views only; /1 and /2 keep their bytes): the same one script,
# extended to filter each CaseRuns table by run, case, outcome and failure kind and to sort
# it by score. The controls are built in the page from the table's own cells (no list of
# values is written twice), the evidence row of an opened CaseRun moves and hides with its
# row, and a line says how many CaseRuns are shown.
_FILTER = """function V(r,j){return r.cells[j].textContent}
document.querySelectorAll('div.crf').forEach(function(f){
var t=f.nextElementSibling.querySelector('table'),y=t.tBodies[0],
hs=[].map.call(t.tHead.rows[0].cells,function(c){return c.textContent}),
rows=[].slice.call(y.rows),sel=[],k=hs.indexOf('total'),n=E('span','muted');
['run','case','outcome','failure'].forEach(function(name){var j=hs.indexOf(name);if(j<0)return;
var l=E('label',null,name+' '),s=E('select'),vs=[];s.setAttribute('data-col',j);
s.appendChild(new Option('all',''));
rows.forEach(function(r){var v=V(r,j);if(vs.indexOf(v)<0)vs.push(v)});
vs.sort().forEach(function(v){s.appendChild(new Option(v,v))});
l.appendChild(s);f.appendChild(l);sel.push(s)});
var o=E('select'),l=E('label',null,'sort ');o.setAttribute('data-sort','');
[['page order',''],['score, high to low','d'],['score, low to high','a']].forEach(function(p){
o.appendChild(new Option(p[0],p[1]))});l.appendChild(o);f.appendChild(l);f.appendChild(n);
function S(r){var x=parseFloat(V(r,k));return isNaN(x)?-1:x}
function apply(){var order=rows.slice(),shown=0;
if(o.value)order.sort(function(a,b){
return (o.value==='d'?S(b)-S(a):S(a)-S(b))||rows.indexOf(a)-rows.indexOf(b)});
order.forEach(function(r){var ev=r.nextElementSibling;
if(!ev||ev.className!=='evidence')ev=null;
var ok=sel.every(function(s){return !s.value||V(r,+s.getAttribute('data-col'))===s.value});
r.hidden=!ok;if(ev&&!ok){ev.hidden=true;var b=r.querySelector('button.cr');
b.textContent='show';b.setAttribute('aria-expanded','false')}
y.appendChild(r);if(ev)y.appendChild(ev);if(ok)shown++});
n.textContent=' '+shown+' of '+rows.length+' CaseRuns shown'}
f.addEventListener('change',apply);apply()});
"""
_SCRIPT_V3 = _SCRIPT.removesuffix("})();") + _FILTER + "})();"
#: Issue 35 (``/3`` views): a phone layout. Long hashes fold to one line (the whole hash
#: is kept: it opens on focus or click and is copied whole), numbers align right in
#: every table, and the CaseRuns controls wrap.
_STYLE_V3 = """
code.hash{display:inline-block;max-width:18ch;overflow:hidden;text-overflow:ellipsis;
white-space:nowrap;vertical-align:bottom;cursor:pointer}
code.hash:focus{max-width:none;white-space:normal;overflow-wrap:anywhere}
div.crf{display:flex;flex-wrap:wrap;gap:4px 12px;align-items:center;margin:6px 0}
div.crf select{font:inherit;max-width:60vw}
"""


def _csp(script: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    return (
        f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'"
    )


_CSP = _csp(_SCRIPT)
_CSP_V3 = _csp(_SCRIPT_V3)


def _e(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return html.escape(str(value), quote=True)


def _plain(value: Any) -> str:
    """A value as the evidence shows it (the script sets it as text: never escaped)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _q(value: Decimal) -> str:
    return str(value.quantize(_PLACES))


def _hash(value: str, v3: bool) -> str:
    """A long hash as code; in the ``/3`` view folded to one line (``code.hash``) and
    opened whole on focus, its full text also its title."""
    if not v3:
        return f"<code>{_e(value)}</code>"
    return f'<code class="hash" tabindex="0" title="{_e(value)}">{_e(value)}</code>'


_CODE = re.compile(r"`([^`]+)`")


def _md(text: str) -> str:
    """Text written as Markdown (``tables.VARIANT_NOTE``) as HTML: escaped, with its
    `code` spans as ``<code>``; the only Markdown such texts use."""
    return _CODE.sub(r"<code>\1</code>", _e(text))


#: What a cell of a number looks like: numbers, fractions (``3/2/1``), ``mean / sd``,
#: intervals (``0.1 to 0.5``), a rank (``2=``), each optionally with a bracketed note
#: (``12.50 (estimate)``, ``4 (0.5000)``).
_NUMBER = re.compile(r"[-+]?\d[\d.]*=?(?:(?: / |/| | to )[-+]?\d[\d.]*)*(?: \([^()]*\))?")


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int | Decimal):
        return True
    return isinstance(value, str) and _NUMBER.fullmatch(value) is not None
