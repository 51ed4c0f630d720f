/* Shared helpers of treesearch's report pages (no network, no other library than d3). */
"use strict";
const TS = (function () {
  const data = JSON.parse(document.getElementById("ts-data").textContent);

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") e.textContent = String(v);
      else if (k === "onclick") e.addEventListener("click", v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      e.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
    }
    return e;
  }

  function fmt(v, digits) {
    if (v === null || v === undefined) return "-";
    if (typeof v === "number") {
      if (Number.isInteger(v)) return v.toLocaleString("en-US");
      return v.toFixed(digits === undefined ? 3 : digits);
    }
    return String(v);
  }

  /* A long text as a <pre>, with its note (cut, unavailable) said above it. */
  function textBlock(item, cls, colour) {
    const box = el("div", { class: cls || null });
    if (!item) { box.appendChild(el("div", { class: "note", text: "(nothing recorded)" })); return box; }
    if (item.note) box.appendChild(el("div", { class: "truncated", text: item.note }));
    if (item.text) {
      const pre = el("pre");
      const lines = item.text.split("\n");
      if (colour && lines.length < 6000) {
        for (const line of lines) {
          let c = null;
          if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff --git")) c = "#5b6575";
          else if (line.startsWith("+")) c = "#0a7d32";
          else if (line.startsWith("-")) c = "#b42318";
          else if (line.startsWith("@@")) c = "#2457c5";
          const span = el("span", { style: c ? "color:" + c : null, text: line + "\n" });
          pre.appendChild(span);
        }
      } else {
        pre.textContent = item.text;
      }
      box.appendChild(pre);
    }
    return box;
  }

  /* A table from columns and rows; a cell is a value or {text, href, cls, title}. */
  function table(columns, rows, attrs) {
    const t = el("table", attrs || {});
    const head = el("tr");
    for (const c of columns) head.appendChild(el("th", { text: c }));
    t.appendChild(el("thead", {}, head));
    const body = el("tbody");
    for (const row of rows) {
      const tr = el("tr");
      for (const cell of row) {
        const isObj = cell !== null && typeof cell === "object";
        const value = isObj ? cell.text : cell;
        const td = el("td", {
          class: (typeof value === "number" ? "num " : "") + (isObj && cell.cls ? cell.cls : ""),
          title: isObj ? cell.title : null,
          "data-key": isObj ? cell.key : null,
        });
        if (isObj && cell.href) td.appendChild(el("a", { href: cell.href, text: fmt(value) }));
        else td.textContent = fmt(value);
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
    t.appendChild(body);
    return t;
  }

  function notes(list, where) {
    for (const n of list || []) where.appendChild(el("p", { class: "note warn", text: n }));
  }

  return { data, el, fmt, textBlock, table, notes };
})();
