// Live plots: every element with class "plot" polls /api/plot for its series (the
// sampler's history on the server) and redraws with uPlot. data-series: comma-separated
// series names; data-labels: their legends; data-rate="1": plot per-second rates;
// data-time="0": the x values are plain seconds (e.g. since a chaos run's start), not dates.
(function () {
  const refreshMs = parseInt(document.body.dataset.refreshMs || "2000", 10);
  const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                   "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"];

  function makePlot(el) {
    // data-url: a page's own plot data (same columnar form) instead of sampled series
    const series = el.dataset.series || "";
    const labels = (el.dataset.labels || series).split(",");
    const url = el.dataset.url ? el.dataset.url :
                "/api/plot?series=" + encodeURIComponent(series) +
                (el.dataset.rate === "1" ? "&rate=1" : "") +
                "&window_s=" + (el.dataset.windowS || "900");
    const opts = {
      width: Math.min(880, el.clientWidth || 880), height: 200,
      series: [{}].concat(labels.map((l, i) => ({label: l, stroke: palette[i % palette.length],
                                                 width: 1.5, spanGaps: true}))),
      axes: [{}, {size: 70}],
      scales: {x: {time: el.dataset.time !== "0"}},
    };
    let plot = null;
    async function refresh() {
      try {
        const r = await fetch(url, {cache: "no-store"});
        if (!r.ok) { el.dataset.state = "error " + r.status; return; }
        const body = await r.json();
        if (plot === null) { plot = new uPlot(opts, body.data, el); }
        else { plot.setData(body.data); }
        el.dataset.points = String(body.data[0].length);
        el.dataset.last = JSON.stringify(body.data.slice(1).map(c => c.length ? c[c.length - 1] : null));
        el.dataset.max = JSON.stringify(body.data.slice(1).map(
          c => c.reduce((m, v) => (v !== null && (m === null || v > m)) ? v : m, null)));
        el.dataset.state = "ok";
      } catch (e) { el.dataset.state = "error " + e; }
    }
    refresh();
    setInterval(refresh, refreshMs);
  }

  document.querySelectorAll(".plot").forEach(makePlot);
})();
