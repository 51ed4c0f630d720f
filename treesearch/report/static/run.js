/* A run's page: the search tree (d3 tree layout over each node's shortest-path parent; the other
   parents are transposition edges), a summary box, and a panel for the clicked node. */
(function () {
  const { data, el, fmt, textBlock, table, notes } = TS;
  const main = document.getElementById("main");
  const byId = new Map(data.nodes.map((n) => [n.id, n]));
  const onBest = new Set(data.best_path);
  const bestEdges = new Set();
  for (let i = 1; i < data.best_path.length; i++) bestEdges.add(data.best_path[i - 1] + ">" + data.best_path[i]);

  document.getElementById("subtitle").textContent =
    `${data.status || "?"} (${data.stop_reason || "-"}); policy ${data.policy || "-"}, seed ${fmt(data.seed)}; ` +
    `${data.nodes.length} nodes, best #${byId.get(data.best).order} score ${fmt(data.best_score)}`;
  notes(data.notes, main);
  notes((data.warnings || []).map((w) => "warning: " + w), main);

  // ---- summary box: budget used, time per phase
  const box = el("div", { class: "summary-box", id: "summary-box" });
  const usage = data.usage || {}, budget = data.budget || {};
  const rows = [];
  for (const key of ["expansions", "test_runs", "tokens", "usd", "wall_seconds", "max_depth"]) {
    if (usage[key] === undefined && (budget[key] === undefined || budget[key] === null)) continue;
    const used = key === "max_depth" ? Math.max(...data.nodes.map((n) => n.depth)) : usage[key];
    const limit = budget[key];
    const pct = limit ? ` (${Math.round((100 * used) / limit)}%)` : "";
    rows.push([key.replace("_", " "), used === undefined ? "-" : fmt(used, 1) + pct, limit === null || limit === undefined ? "no limit" : fmt(limit, 1)]);
  }
  box.appendChild(el("h2", { text: "Budget used" }));
  box.appendChild(table(["budget", "used", "limit"], rows, { id: "budget-table" }));
  const ph = (data.phases || {}).seconds || {};
  const total = Object.values(ph).reduce((a, b) => a + b, 0);
  box.appendChild(el("h2", { text: "Time per phase" }));
  const prow = Object.entries(ph).map(([k, v]) => {
    const bar = el("span", { class: "bar", style: `width:${total ? Math.round((160 * v) / total) : 0}px` });
    const td = el("span", {}, bar, " " + (total ? Math.round((100 * v) / total) : 0) + "%");
    return [k, { text: v.toFixed(2) + " s" }, { text: "" , key: "bar-" + k }, td];
  });
  const pt = table(["phase", "seconds", "share"], prow.map((r) => r.slice(0, 3)), { id: "phase-table" });
  pt.querySelectorAll("tbody tr").forEach((tr, i) => { tr.children[2].appendChild(prow[i][3]); });
  box.appendChild(pt);
  box.appendChild(el("div", { class: "note", text:
    `${fmt((data.phases || {}).expansions)} expansions timed (timings.jsonl); run wall time ${fmt(data.seconds, 1)} s` }));
  const errs = data.agent_errors || {};
  if (errs.count) box.appendChild(el("div", { class: "warn", text: `agent errors: ${errs.count} of ${errs.expansions} expansions failed` }));
  if (data.grade) box.appendChild(el("div", { text: `held-out grade: ${fmt(data.grade.score)}${data.grade.resolved ? " (resolved)" : ""}` }));
  const path = data.best_path.slice(1).map((t, i) => {
    const e = data.edges.find((x) => x.source === data.best_path[i] && x.target === t);
    return e ? e.strategy : "?";
  });
  box.appendChild(el("div", { text: "best path: " + (path.length ? path.join(" → ") : "(the root itself)") }));

  // ---- layout
  const layout = el("div", { class: "layout" });
  const graphBox = el("div", { class: "graph-box", id: "graph" });
  const side = el("div", { class: "side" });
  side.appendChild(box);
  const panel = el("div", { id: "node-panel" }, el("p", { class: "note", text: "Click a node to see its tests, diffs and transcript." }));
  side.appendChild(panel);
  layout.appendChild(graphBox);
  layout.appendChild(side);
  main.appendChild(layout);

  const strat = d3.stratify().id((d) => d.id).parentId((d) => d.layout_parent);
  const hroot = strat(data.nodes);
  hroot.sort((a, b) => a.data.order - b.data.order);
  const dx = 34, dy = 90;
  d3.tree().nodeSize([dx, dy]).separation((a, b) => (a.parent === b.parent ? 1 : 1.3))(hroot);
  const pos = new Map();
  let x0 = Infinity, x1 = -Infinity, y1 = 0;
  hroot.each((d) => { pos.set(d.id, d); x0 = Math.min(x0, d.x); x1 = Math.max(x1, d.x); y1 = Math.max(y1, d.y); });
  const maxVisits = Math.max(1, ...data.nodes.map((n) => n.visits || 0));
  const radius = (n) => 5 + 13 * Math.sqrt((n.visits || 0) / maxVisits);
  // A partial node (a failing-first screen stopped early): its score is a range.
  const partialText = (p) => `partial: ${p.known_passed} passed, ${p.known_failed} failed known, ${p.not_run} not run`;
  // Shown as lower..upper: the tests not run counted as failed, then as passed (the search
  // ranks the node by the upper bound until it completes its run).
  const scoreText = (n) => {
    if (!n.partial || n.score === null || n.score === undefined) return fmt(n.score);
    return n.partial.upper === null || n.partial.upper === undefined ? ">=" + fmt(n.score) : fmt(n.score) + ".." + fmt(n.partial.upper);
  };
  const colour = (s) => (s === null || s === undefined ? "#c9ced6" : d3.interpolateRdYlGn(0.1 + 0.8 * s));

  const width = Math.max(600, x1 - x0 + 120), height = y1 + 110;
  const svg = d3.select(graphBox).append("svg")
    .attr("id", "tree-svg").attr("width", "100%").attr("height", Math.min(760, Math.max(420, height)))
    .attr("viewBox", [x0 - 60, -40, width, height].join(" "));
  const g = svg.append("g").attr("class", "zoom-layer");
  svg.call(d3.zoom().scaleExtent([0.1, 6]).on("zoom", (ev) => g.attr("transform", ev.transform)));
  svg.append("defs").append("marker").attr("id", "arrow").attr("viewBox", "0 -4 8 8").attr("refX", 8)
    .attr("markerWidth", 6).attr("markerHeight", 6).attr("orient", "auto")
    .append("path").attr("d", "M0,-4L8,0L0,4").attr("fill", "#7b3fb5");

  const edgeLayer = g.append("g").attr("class", "edges");
  for (const e of data.edges) {
    const a = pos.get(e.source), b = pos.get(e.target);
    if (!a || !b) continue;
    const best = bestEdges.has(e.source + ">" + e.target);
    let d;
    if (e.tree) d = d3.linkVertical()({ source: [a.x, a.y], target: [b.x, b.y - radius(b.data)] });
    else {
      const mx = (a.x + b.x) / 2 + (b.y - a.y) * 0.35, my = (a.y + b.y) / 2;
      d = `M${a.x},${a.y}Q${mx},${my} ${b.x},${b.y - radius(b.data)}`;
    }
    edgeLayer.append("path")
      .attr("class", "edge " + (e.tree ? "tree" : "transposition") + (best ? " on-best-path" : ""))
      .attr("d", d).attr("marker-end", e.tree ? null : "url(#arrow)")
      .attr("data-source", e.source).attr("data-target", e.target)
      .append("title").text(`${e.strategy}${e.tree ? "" : " (transposition: an earlier state reached again)"}` +
        (e.diffstat ? `; ${e.diffstat}` : ""));
  }
  // No-ops: a dotted loop on the node (nothing changed) or a dotted arc back to the ancestor reached.
  for (const n of data.nodes) {
    const groups = new Map();
    for (const o of n.noops) groups.set(o.to, (groups.get(o.to) || []).concat([o]));
    const a = pos.get(n.id), r = radius(n);
    for (const [to, list] of groups) {
      const b = pos.get(to);
      let d;
      if (!b || to === n.id) d = `M${a.x + r * 0.7},${a.y - r * 0.7}c${r + 14},-${r + 18} ${r + 22},${r + 6} ${r * 0.3 + 2},${r * 0.7 + 2}`;
      else d = `M${a.x},${a.y - r}Q${(a.x + b.x) / 2 - (a.y - b.y) * 0.4},${(a.y + b.y) / 2} ${b.x},${b.y + radius(b.data)}`;
      const p = edgeLayer.append("path").attr("class", "edge noop").attr("d", d)
        .attr("data-source", n.id).attr("data-target", to).attr("data-count", list.length);
      p.append("title").text(`${list.length} no-op expansion(s) from #${n.order}: ` +
        [...new Set(list.map((o) => o.strategy))].join(", ") + (to === n.id ? " (nothing changed)" : " (back to an ancestor)"));
    }
  }

  const nodeLayer = g.append("g").attr("class", "nodes");
  const nodeSel = nodeLayer.selectAll("g.node").data(hroot.descendants()).join("g")
    .attr("class", (d) => "node" + (onBest.has(d.id) ? " on-best-path" : "") + (d.id === data.best ? " best" : "") + (d.id === data.root ? " root" : "") + (d.data.partial ? " partial" : ""))
    .attr("data-node", (d) => d.id)
    .attr("data-order", (d) => d.data.order)
    .attr("data-score", (d) => (d.data.score === null ? "" : d.data.score))
    .attr("transform", (d) => `translate(${d.x},${d.y})`)
    .on("click", (ev, d) => select(d.id));
  // A partial node is an open circle, with an inner ring in its lower bound's colour.
  nodeSel.append("circle").attr("r", (d) => radius(d.data))
    .attr("fill", (d) => (d.data.partial ? "#ffffff" : colour(d.data.score)));
  nodeSel.filter((d) => d.data.partial).append("circle").attr("class", "partial-ring")
    .attr("r", (d) => Math.max(2, radius(d.data) - 3)).attr("fill", "none")
    .style("stroke", (d) => colour(d.data.score));
  nodeSel.append("text").attr("dy", (d) => radius(d.data) + 11).attr("text-anchor", "middle").text((d) => "#" + d.data.order);
  nodeSel.append("title").text((d) => `#${d.data.order} ${d.id.slice(0, 12)}  score ${scoreText(d.data)}  visits ${d.data.visits}\n` +
    (d.data.partial ? `${partialText(d.data.partial)} (from the tests not run all failing to all passing; ranked by the upper bound until its run is completed)\n` : "") +
    `${(d.data.tests || {}).summary || ""}${d.data.noops.length ? `\n${d.data.noops.length} no-op` : ""}${d.data.errors.length ? `\n${d.data.errors.length} agent error(s)` : ""}`);
  nodeSel.filter((d) => d.data.errors.length > 0).append("circle").attr("class", "badge-error")
    .attr("r", 4).attr("cx", (d) => radius(d.data)).attr("cy", (d) => -radius(d.data));

  // legend
  const legend = el("div", { class: "legend" });
  const partials = data.nodes.some((n) => n.partial);
  const ls = d3.select(legend).append("svg").attr("width", 300).attr("height", partials ? 74 : 58);
  const grad = ls.append("defs").append("linearGradient").attr("id", "score-grad");
  for (let i = 0; i <= 10; i++) grad.append("stop").attr("offset", i * 10 + "%").attr("stop-color", colour(i / 10));
  ls.append("rect").attr("x", 40).attr("y", 4).attr("width", 120).attr("height", 8).attr("fill", "url(#score-grad)");
  ls.append("text").attr("x", 0).attr("y", 12).text("score 0");
  ls.append("text").attr("x", 165).attr("y", 12).text("1  (size: visits)");
  const items = [["tree", "found from"], ["on-best-path", "best path"], ["transposition", "transposition"], ["noop", "no-op"]];
  items.forEach(([c, label], i) => {
    const x = (i % 2) * 150, y = 26 + Math.floor(i / 2) * 16;
    ls.append("path").attr("class", "edge " + c).attr("d", `M${x},${y}h26`);
    ls.append("text").attr("x", x + 30).attr("y", y + 3).text(label);
  });
  if (partials) {
    ls.append("circle").attr("class", "legend-partial").attr("cx", 6).attr("cy", 64).attr("r", 5);
    ls.append("text").attr("x", 16).attr("y", 67).text("partial: score lower..upper (tests not run)");
  }
  graphBox.appendChild(legend);

  // ---- the node panel
  function select(id) {
    nodeSel.classed("selected", (d) => d.id === id);
    const n = byId.get(id);
    panel.replaceChildren();
    panel.setAttribute("data-selected", id);
    const tags = el("div");
    if (id === data.best) tags.appendChild(el("span", { class: "tag good", text: "best node" }));
    else if (onBest.has(id)) tags.appendChild(el("span", { class: "tag good", text: "on the best path" }));
    if (id === data.root) tags.appendChild(el("span", { class: "tag", text: "root" }));
    if (n.partial) tags.appendChild(el("span", { class: "tag partial", text: "partial result" }));
    panel.appendChild(el("h2", {}, `Node #${n.order} `, el("code", { text: id })));
    panel.appendChild(tags);
    const mean = n.visits ? n.value_sum / n.visits : null;
    panel.appendChild(table(["score", "visits", "mean reward", "depth", "changed lines from root"],
      [[scoreText(n), n.visits, fmt(mean), n.depth, n.diff_size]]));
    panel.appendChild(el("h3", { text: "Tests" }));
    const t = n.tests || {};
    panel.appendChild(el("div", { class: "tests-summary", text: t.summary || "(not scored)" }));
    if (n.partial) {
      panel.appendChild(el("div", { class: "partial-detail", text:
        `${partialText(n.partial)}: a failing-first screen stopped early` + (n.partial.reason ? ` (${n.partial.reason})` : "") +
        `; the score ${scoreText(n)} runs from the ${n.partial.not_run} tests not run all failing to all passing (the search ranks the node by the upper bound and completes its run before it builds on it)` }));
    }
    if ((t.failing || []).length) {
      const ul = el("ul", { class: "failing" });
      for (const f of t.failing.slice(0, 200)) ul.appendChild(el("li", {}, el("code", { text: f })));
      if (t.failing.length > 200) ul.appendChild(el("li", { class: "truncated", text: `${t.failing.length - 200} more` }));
      panel.appendChild(el("div", { text: "failing:" }));
      panel.appendChild(ul);
    }
    if (n.test_log) panel.appendChild(el("details", {}, el("summary", { text: "test output" }), textBlock(n.test_log, "test-log")));

    const incoming = data.edges.filter((e) => e.target === id);
    for (const e of incoming) {
      const from = byId.get(e.source);
      panel.appendChild(el("h3", { text: `${e.tree ? "Found from" : "Also reached (transposition) from"} #${from.order} by ${e.strategy}` }));
      panel.appendChild(el("div", { class: "note", text:
        `status ${e.status || "-"}, ${fmt(e.steps)} steps, ${fmt(e.tokens)} tokens` + (e.diffstat ? `, ${e.diffstat}` : "") +
        (e.reason ? `; reason: ${e.reason}` : "") + (e.also.length ? `; also by ${e.also.map((x) => x.strategy).join(", ")}` : "") }));
      panel.appendChild(el("div", { class: "label", text: `Diff from the parent #${from.order}` }));
      panel.appendChild(textBlock(diffItem(e.diff), "diff-parent", true));
      panel.appendChild(el("details", { class: "transcript" }, el("summary", { text: `Agent transcript (${e.transcript || "none"})` }),
        textBlock(e.transcript_text, "transcript-text")));
    }
    if (id !== data.root) {
      panel.appendChild(el("h3", { text: "Diff from the root" }));
      panel.appendChild(textBlock(diffItem(n.diff_root), "diff-root", true));
    }
    const outs = [["no-op", n.noops], ["agent error", n.errors]];
    for (const [label, list] of outs) {
      if (!list.length) continue;
      panel.appendChild(el("h3", { text: `${list.length} ${label}${list.length > 1 ? "s" : ""} from here` }));
      panel.appendChild(table(["strategy", "status", "back to", "reason"], list.map((o) => [
        o.strategy, o.status, o.to === id ? "itself" : "#" + (byId.get(o.to) || { order: "?" }).order, o.reason || ""])));
    }
  }

  function diffItem(item) {
    if (item) return item;
    return { text: "", note: data.diffs_available ? "no diff recorded" : "diffs unavailable (the run's store is gone)" };
  }

  window.treesearchSelect = select;

})();
