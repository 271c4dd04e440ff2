"""The HTML page's trees of stacks (htmltrees.py): the script that makes the top-down and
bottom-up trees and the callers and callees of a function from the page's JSON (`stack-data`),
as ARIA tree grids usable with the keyboard, and their style."""

from __future__ import annotations

__all__ = ["SHOWN", "TREE_SCRIPT", "TREE_STYLE"]

#: a row's children shown before a "more" row (Enter or a click on it shows them all)
SHOWN = 50

TREE_STYLE = """
table.tree { width: 1000px; table-layout: fixed; font: 12px monospace; margin-bottom: 0.6em; }
table.tree th { font: bold 12px sans-serif; border-bottom: 1px solid #999; width: 11%; }
table.tree th:first-child { width: 56%; } table.tree th.n { text-align: right; }
table.tree th button { font: inherit; background: none; border: none; padding: 0;
cursor: pointer; color: #2a5cb0; } table.tree th[aria-sort] button::after { content: " \\25BE"; }
table.tree th[aria-sort="ascending"] button::after { content: " \\25B4"; }
table.tree td { padding: 1px 10px 1px 0; white-space: nowrap; }
table.tree td.fn { overflow: hidden; text-overflow: ellipsis; }
table.tree tbody tr { cursor: pointer; } table.tree tbody tr:hover { background: #eef3fb; }
table.tree tbody tr:focus { outline: 2px solid #2a5cb0; background: #dce7f7; }
table.tree tr.picked { background: #fdf2d0; } table.tree tr.more td { color: #666; }
table.tree .tw { display: inline-block; width: 1.2em; color: #666; }
"""

TREE_SCRIPT = """
(() => {
const el = document.getElementById("stack-data");
if (!el) return;  // the --base page has no trees
const data = JSON.parse(el.textContent);
const FN = data.functions, COLS = data.columns, NC = COLS.length, SHOWN = SHOWN_ROWS;
const zero = () => new Array(NC).fill(0);
const add = (a, v) => { for (let i = 0; i < NC; i++) a[i] += v[i]; };
const node = (name, id) => ({name, id, v: zero(), kids: new Map(), open: false, all: false});
// the tree of nodes: node i's parent and function
const parent = [], fnOf = [];
for (let i = 0; i < data.nodes.length; i += 2) {
  parent.push(i / 2 - data.nodes[i]);
  fnOf.push(data.nodes[i + 1]);
}
// top-down: the tree of nodes itself, each node's figures its stacks' and its callees'
function topDown() {
  const root = node("all", -1), nodes = fnOf.map((f) => node(FN[f], f));
  root.open = true;
  for (const s of data.stacks) add(s[0] < 0 ? root.v : nodes[s[0]].v, s.slice(1));
  for (let i = nodes.length - 1; i >= 0; i--) {
    const up = parent[i] < 0 ? root : nodes[parent[i]];
    up.kids.set(fnOf[i], nodes[i]);
    add(up.v, nodes[i].v);
  }
  return [root];
}
// bottom-up: each stack from its innermost function out, a node's children made when they are
// first asked for (a row shown): a node holds its stacks, (stack, its trie node there) each
const vals = data.stacks.map((s) => s.slice(1));
const INNERMOST = -2;  // a stack before its innermost frame (the root's members)
class Up {
  constructor(name, id, members) {
    Object.assign(this, {name, id, v: zero(), open: false, all: false, members, made: null});
    for (let i = 0; i < members.length; i += 2) add(this.v, vals[members[i]]);
  }
  get kids() {
    if (this.made) return this.made;
    const by = new Map(), m = this.members;
    for (let i = 0; i < m.length; i += 2) {
      const p = m[i + 1] === INNERMOST ? data.stacks[m[i]][0] : parent[m[i + 1]];
      if (p < 0) continue;
      let g = by.get(fnOf[p]);
      if (!g) by.set(fnOf[p], g = []);
      g.push(m[i], p);
    }
    this.made = new Map([...by].map(([f, g]) => [f, new Up(FN[f], f, g)]));
    return this.made;
  }
}
function bottomUp() {
  const root = new Up("all", -1, data.stacks.flatMap((s, k) => [k, INNERMOST]));
  root.open = true;
  return [root];
}
// each function's figures, its callers' and its callees', each stack counted once in each
const fns = FN.map((name, id) => ({name, id, v: zero(), callers: new Map(),
                                   callees: new Map(), stamp: -1}));
function count(map, id, v, stamp) {
  let e = map.get(id);
  if (!e) map.set(id, e = {v: zero(), stamp: -1});
  if (e.stamp !== stamp) { e.stamp = stamp; add(e.v, v); }
}
data.stacks.forEach((s, k) => {
  const v = vals[k];
  for (let n = s[0]; n >= 0; n = parent[n]) {
    const f = fns[fnOf[n]];
    if (f.stamp !== k) { f.stamp = k; add(f.v, v); }
    if (parent[n] >= 0) {
      const c = fnOf[parent[n]];
      count(f.callers, c, v, k);
      count(fns[c].callees, f.id, v, k);
    }
  }
});
const flat = (map) => [...map].map(([id, e]) => ({name: FN[id], id, v: e.v, kids: null}));
const fmt = (n) => n.toLocaleString("en-US");
// a shown row's identity: its node, or its "more" row's
const ident = (r) => r.n || r.more.moreRow;

class Grid {
  constructor(table, roots, pick) {
    this.table = table;
    this.roots = roots;
    this.pick = pick;
    this.col = 0;
    this.asc = false;
    this.focused = roots[0] || null;
    this.picked = null;
    this.all = false;
    table.replaceChildren();
    table.setAttribute("role", "treegrid");
    const head = table.createTHead().insertRow();
    head.appendChild(document.createElement("th")).textContent = "function";
    this.heads = COLS.map((c, i) => {
      const th = head.appendChild(document.createElement("th"));
      th.className = "n";
      const b = th.appendChild(document.createElement("button"));
      b.textContent = c;
      b.addEventListener("click", () => this.sort(i));
      return th;
    });
    this.body = table.createTBody();
    this.body.addEventListener("keydown", (e) => this.key(e));
    this.body.addEventListener("click", (e) => {
      const tr = e.target.closest("tr");
      if (tr && this.rows.length) this.act(this.rows[tr.rowIndex - 1], true);
    });
    this.render();
  }
  sort(i) {
    this.asc = this.col === i ? !this.asc : false;
    this.col = i;
    this.render();
  }
  order(kids) {
    const c = this.col, s = this.asc ? 1 : -1;
    return [...kids].sort((a, b) => s * (a.v[c] - b.v[c]) || (a.name < b.name ? -1 : 1));
  }
  // the rows shown: each open row's children, SHOWN of them until its "more" row is taken
  visible() {
    const out = [];
    const walk = (list, level, parent) => {
      const kids = this.order(list), holder = parent || this;
      const shown = holder.all ? kids : kids.slice(0, SHOWN);
      for (const n of shown) {
        out.push({n, level, parent});
        if (n.kids && n.open) walk(n.kids.values(), level + 1, n);
      }
      if (shown.length < kids.length) {
        holder.moreRow = holder.moreRow || {};  // the "more" row's identity, kept across renders
        out.push({more: holder, level, parent, count: kids.length - shown.length});
      }
    };
    walk(this.roots, 1, null);
    return out;
  }
  render() {
    const had = this.table.contains(document.activeElement) &&
      document.activeElement.tagName === "TR";
    this.heads.forEach((th, i) => {
      if (i === this.col) th.setAttribute("aria-sort", this.asc ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    });
    this.rows = this.visible();
    if (!this.rows.some((r) => ident(r) === this.focused))
      this.focused = this.rows.length ? ident(this.rows[0]) : null;
    const trs = this.rows.map((r) => {
      const tr = document.createElement("tr");
      tr.setAttribute("role", "row");
      tr.setAttribute("aria-level", r.level);
      tr.tabIndex = ident(r) === this.focused ? 0 : -1;
      const name = tr.insertCell();
      name.className = "fn";
      name.style.paddingLeft = (r.level - 1) * 14 + "px";
      if (r.more) {
        tr.className = "more";
        name.textContent = "... " + fmt(r.count) + " more (Enter shows them)";
        for (let i = 0; i < NC; i++) tr.insertCell();
        return tr;
      }
      const n = r.n, has = n.kids && n.kids.size > 0;
      if (has) tr.setAttribute("aria-expanded", n.open);
      if (n === this.picked) tr.classList.add("picked");
      const tw = name.appendChild(document.createElement("span"));
      tw.className = "tw";
      tw.textContent = has ? (n.open ? "\\u25BE" : "\\u25B8") : "";
      name.appendChild(document.createTextNode(n.name));
      name.title = n.name;
      n.v.forEach((x) => {
        const td = tr.insertCell();
        td.className = "n";
        td.textContent = fmt(x);
      });
      return tr;
    });
    if (!trs.length) {
      const tr = document.createElement("tr"), td = tr.insertCell();
      td.colSpan = NC + 1;
      td.className = "none";
      td.textContent = "(none)";
      trs.push(tr);
    }
    this.body.replaceChildren(...trs);
    if (had) this.focusRow(this.rows.findIndex((r) => ident(r) === this.focused));
  }
  focusRow(i) {
    if (i < 0 || i >= this.rows.length) return;
    const r = this.rows[i];
    for (const tr of this.body.rows) tr.tabIndex = -1;
    this.focused = ident(r);
    const tr = this.body.rows[i];
    tr.tabIndex = 0;
    tr.focus();
  }
  act(r, click) {
    if (r.more) {  // its rows shown, the first of them focused
      const at = this.rows.indexOf(r);
      r.more.all = true;
      this.rows = this.visible();
      this.focused = ident(this.rows[at]);
    } else {
      this.focused = r.n;
      if (r.n.kids && r.n.kids.size) r.n.open = !r.n.open;
      if (this.pick) { this.picked = r.n; this.pick(r.n); }
    }
    this.render();
    if (click) this.focusRow(this.rows.findIndex((x) => ident(x) === this.focused));
  }
  key(e) {
    const at = this.rows.findIndex((r) => ident(r) === this.focused), r = this.rows[at];
    if (!r) return;
    const n = r.n, has = n && n.kids && n.kids.size > 0;
    switch (e.key) {
      case "ArrowDown": this.focusRow(at + 1); break;
      case "ArrowUp": this.focusRow(at - 1); break;
      case "Home": this.focusRow(0); break;
      case "End": this.focusRow(this.rows.length - 1); break;
      case "ArrowRight":
        if (has && !n.open) { n.open = true; this.render(); } else if (has) this.focusRow(at + 1);
        break;
      case "ArrowLeft":
        if (has && n.open) { n.open = false; this.render(); }
        else if (r.parent) this.focusRow(this.rows.findIndex((x) => x.n === r.parent));
        break;
      case "Enter": case " ": this.act(r, false); break;
      default: return;
    }
    e.preventDefault();
  }
}

new Grid(document.getElementById("topdown"), topDown(), null);
new Grid(document.getElementById("bottomup"), bottomUp(), null);
const title = (id, text) => { document.getElementById(id).textContent = text; };
let list = null;
function show(f) {
  title("callers-title", "Callers of " + f.name);
  title("callees-title", "Callees of " + f.name);
  const go = (n) => {
    const g = list.roots.find((x) => x.id === n.id);
    list.picked = list.focused = g;
    list.render();
    show(g);
  };
  new Grid(document.getElementById("callers"), flat(fns[f.id].callers), go);
  new Grid(document.getElementById("callees"), flat(fns[f.id].callees), go);
}
list = new Grid(document.getElementById("functions"), fns.map((f) => ({...f, kids: null})),
                show);
if (list.rows.length) {
  list.picked = list.rows[0].n;
  list.render();
  show(list.picked);
}
})();
""".replace("SHOWN_ROWS", str(SHOWN))
