/* An eval or compare page: result tables, then the anytime curves (one SVG path per contender). */
(function () {
  const { data, el, table, notes } = TS;
  const main = document.getElementById("main");
  document.getElementById("subtitle").textContent = data.subtitle || "";
  notes(data.notes, main);

  for (const c of data.curves || []) main.appendChild(chart(c));
  for (const t of data.tables || []) {
    main.appendChild(el("h2", { text: t.title }));
    if (t.note) main.appendChild(el("div", { class: "note", text: t.note }));
    main.appendChild(table(t.columns, t.rows, { id: "table-" + t.id }));
  }
  if (data.spec) {
    main.appendChild(el("details", {}, el("summary", { text: "The compare spec, budget and seeds" }),
      el("pre", { text: JSON.stringify(data.spec, null, 1) })));
  }

  function chart(c) {
    const wrap = el("div", { class: "chart-box" });
    wrap.appendChild(el("h2", { text: c.title }));
    const names = Object.keys(c.lines);
    const W = 720, H = 320, m = { l: 54, r: 170, t: 12, b: 40 };
    let xmax = 0;
    for (const n of names) for (const [x] of c.lines[n]) xmax = Math.max(xmax, x);
    const x = d3.scaleLinear().domain([0, (xmax || 1) * 1.04]).nice().range([m.l, W - m.r]);
    const ticks = Math.max(1, Math.min(8, Math.ceil(x.domain()[1])));
    const y = d3.scaleLinear().domain([0, 1]).range([H - m.b, m.t]);
    const svg = d3.select(wrap).append("svg").attr("class", "chart").attr("width", W).attr("height", H)
      .attr("data-x-label", c.x_label);
    svg.append("g").attr("transform", `translate(0,${H - m.b})`).call(d3.axisBottom(x).ticks(ticks, "~s"));
    svg.append("g").attr("transform", `translate(${m.l},0)`).call(d3.axisLeft(y).ticks(5).tickFormat(d3.format(".0%")));
    svg.append("text").attr("x", (m.l + W - m.r) / 2).attr("y", H - 6).attr("text-anchor", "middle").text(c.x_label);
    svg.append("text").attr("transform", `translate(14,${(H - m.b) / 2}) rotate(-90)`).attr("text-anchor", "middle").text(c.y_label);
    const colour = d3.scaleOrdinal(d3.schemeTableau10).domain(names);
    const line = d3.line().x((p) => x(p[0])).y((p) => y(p[1])).curve(d3.curveStepAfter);
    names.forEach((n, i) => {
      svg.append("path").attr("class", "curve").attr("data-contender", n)
        .attr("stroke", colour(n)).attr("d", line(extended(c.lines[n], x.domain()[1])))
        .append("title").text(n);
      const ly = m.t + 10 + i * 16;
      svg.append("line").attr("x1", W - m.r + 12).attr("x2", W - m.r + 34).attr("y1", ly).attr("y2", ly)
        .attr("stroke", colour(n)).attr("stroke-width", 2);
      svg.append("text").attr("x", W - m.r + 38).attr("y", ly + 4).text(n);
    });
    return wrap;
  }

  /* A step curve carried on flat to the right edge, so that its last step shows. */
  function extended(points, end) {
    if (!points.length) return points;
    const last = points[points.length - 1];
    return last[0] < end ? points.concat([[end, last[1]]]) : points;
  }
})();
