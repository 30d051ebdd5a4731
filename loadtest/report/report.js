// The report script: reads the embedded result and draws tables and uPlot
// charts. When done it sets document.body.dataset.rendered to the number of
// charts drawn.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("result-data").textContent);
  var palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"];
  var windows = data.windows || [];
  var xs = windows.map(function (w) { return w.second; });
  var drawn = 0;

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function fmt(v, digits) {
    if (v === undefined || v === null || isNaN(v)) return "";
    return Number(v).toFixed(digits === undefined ? 2 : digits);
  }
  function pct(v) { return fmt(100 * (v || 0), 3) + "%"; }
  function keys(o) { return Object.keys(o || {}).sort(); }

  function table(parent, title, head, rows, cls) {
    if (!rows.length) return;
    parent.appendChild(el("h2", title));
    var t = el("table", null, cls);
    var tr = el("tr");
    head.forEach(function (h) { tr.appendChild(el("th", h)); });
    t.appendChild(tr);
    rows.forEach(function (r) {
      var row = el("tr");
      r.forEach(function (c) {
        var td = el("td", c && c.text !== undefined ? c.text : c);
        if (c && c.cls) td.className = c.cls;
        row.appendChild(td);
      });
      t.appendChild(row);
    });
    parent.appendChild(t);
  }

  function chart(title, x, series, yLabel) {
    var box = el("div", null, "chart");
    box.appendChild(el("h3", title));
    document.getElementById("charts").appendChild(box);
    var width = Math.max(600, Math.min(1180, (document.body.clientWidth || 1200) - 40));
    var opts = {
      width: width,
      height: 260,
      scales: { x: { time: false } },
      axes: [{ label: x.label }, { label: yLabel, size: 70 }],
      series: [{ label: x.label }].concat(series.map(function (s, i) {
        return { label: s.label, stroke: palette[i % palette.length], width: 1.5, points: { show: x.values.length < 60 } };
      })),
    };
    new uPlot(opts, [x.values].concat(series.map(function (s) { return s.values; })), box);
    drawn++;
  }
  function perWindow(f) { return windows.map(function (w) { var v = f(w); return v === undefined ? null : v; }); }
  function perSecond(n, w) { return w.duration_seconds > 0 ? n / w.duration_seconds : null; }

  function summary() {
    var s = data.summary, c = data.latency.corrected, sv = data.latency.service;
    var root = document.getElementById("summary");
    table(root, "Summary", ["metric", "value"], [
      ["profile", data.config.profile],
      ["scenarios", (data.config.mix || []).map(function (m) { return m.name + "×" + m.weight; }).join(", ")],
      ["target rate (iterations/s)", fmt(s.target_rate, 1)],
      ["achieved rate (iterations/s)", fmt(s.achieved_rate, 1)],
      ["iterations (failed)", s.iterations + " (" + s.iterations_failed + ")"],
      ["late starts", { text: s.late_starts, cls: s.late_starts ? "bad" : "" }],
      ["dropped", { text: s.dropped, cls: s.dropped ? "bad" : "" }],
      ["requests (per second)", s.requests + " (" + fmt(s.request_rate, 1) + ")"],
      ["errors", { text: s.errors + " (" + pct(s.error_rate) + ")", cls: s.errors ? "bad" : "" }],
      ["declines (expected)", s.declines],
      ["corrected p50 / p99 / max (ms)", fmt(c.p50_ms) + " / " + fmt(c.p99_ms) + " / " + fmt(c.max_ms)],
      ["service p50 / p99 / max (ms)", fmt(sv.p50_ms) + " / " + fmt(sv.p99_ms) + " / " + fmt(sv.max_ms)],
      ["start lag p99 (ms)", fmt(data.start_lag.p99_ms)],
      ["bytes sent / received", s.bytes_sent + " / " + s.bytes_received],
      ["p99 trend (ms/min)", fmt(data.trend.p99_ms_per_minute, 3)],
    ], "kv");
    var warn = document.getElementById("warnings");
    (data.warnings || []).forEach(function (w) { warn.appendChild(el("div", w, "warn")); });
  }

  function charts() {
    var x = { label: "second", values: xs };
    chart("Throughput", x, [
      { label: "target rate", values: perWindow(function (w) { return w.target_rate; }) },
      { label: "started/s", values: perWindow(function (w) { return perSecond(w.started, w); }) },
      { label: "requests/s", values: perWindow(function (w) { return perSecond(w.requests, w); }) },
      { label: "errors/s", values: perWindow(function (w) { return perSecond(w.errors, w); }) },
    ], "per second");
    chart("Latency percentiles (corrected, and service time)", x, [
      { label: "p50", values: perWindow(function (w) { return w.corrected.p50_ms; }) },
      { label: "p90", values: perWindow(function (w) { return w.corrected.p90_ms; }) },
      { label: "p99", values: perWindow(function (w) { return w.corrected.p99_ms; }) },
      { label: "max", values: perWindow(function (w) { return w.corrected.max_ms; }) },
      { label: "service p50", values: perWindow(function (w) { return w.service.p50_ms; }) },
      { label: "service p99", values: perWindow(function (w) { return w.service.p99_ms; }) },
    ], "ms");
    chart("p99 per request type (corrected)", x, keys(data.request_types).map(function (name) {
      return { label: name, values: perWindow(function (w) { var t = (w.types || {})[name]; return t ? t.p99_ms : null; }) };
    }), "ms");
    chart("Status codes", x, ["2xx", "3xx", "4xx", "5xx", "transport"].map(function (c) {
      return { label: c, values: perWindow(function (w) { return (w.status || {})[c] || 0; }) };
    }), "per window");
    chart("Late starts and drops", x, [
      { label: "late", values: perWindow(function (w) { return w.late; }) },
      { label: "dropped", values: perWindow(function (w) { return w.dropped; }) },
    ], "per window");
    chart("CPU (% of one core)", x, [
      { label: "injector", values: perWindow(function (w) { return w.injector ? w.injector.cpu_percent : null; }) },
      { label: "server", values: perWindow(function (w) { return w.server ? w.server.cpu_percent : null; }) },
    ], "%");
    chart("RSS (MiB)", x, [
      { label: "injector", values: perWindow(function (w) { return w.injector ? w.injector.rss_bytes / 1048576 : null; }) },
      { label: "server", values: perWindow(function (w) { return w.server ? w.server.rss_bytes / 1048576 : null; }) },
    ], "MiB");
    var minutes = data.minutes || [];
    if (minutes.length) {
      var mx = { label: "minute", values: minutes.map(function (m) { return m.minute; }) };
      var perMinute = function (f) { return minutes.map(function (m) { var v = f(m); return v === undefined ? null : v; }); };
      chart("Per minute: latency (corrected)", mx, [
        { label: "p50", values: perMinute(function (m) { return m.corrected.p50_ms; }) },
        { label: "p99", values: perMinute(function (m) { return m.corrected.p99_ms; }) },
        { label: "worst second's p99", values: perMinute(function (m) { return m.worst_second_p99_ms; }) },
        { label: "max", values: perMinute(function (m) { return m.corrected.max_ms; }) },
      ], "ms");
      chart("Per minute: refused (503, 429) and server RSS", mx, [
        { label: "refused", values: perMinute(function (m) { return m.refused; }) },
        { label: "RSS max MiB", values: perMinute(function (m) { return m.server ? m.server.rss_bytes_max / 1048576 : null; }) },
      ], "");
      chart("Per minute: the server's work per request", mx, [
        { label: "CPU us", values: perMinute(function (m) { return m.server && m.server.cpu_us_per_request ? m.server.cpu_us_per_request : null; }) },
        { label: "heap allocations", values: perMinute(function (m) { return m.server && m.server.allocs_per_request ? m.server.allocs_per_request : null; }) },
      ], "");
      chart("Per minute: bytes per sale", mx, [
        { label: "written (write_bytes)", values: perMinute(function (m) { return m.server && m.server.write_bytes >= 0 ? m.server.write_bytes_per_sale : null; }) },
        { label: "stored (data folder)", values: perMinute(function (m) { return m.server && m.server.data_dir_bytes_per_sale ? m.server.data_dir_bytes_per_sale : null; }) },
      ], "bytes");
      if (minutes.some(function (m) { return m.server && m.server.writer; })) {
        var shed = function (w) { var n = 0; keys(w.shed || {}).forEach(function (k) { n += w.shed[k]; }); return n; };
        chart("Per minute: the server's writer (--server-metrics)", mx, [
          { label: "longest commit ms", values: perMinute(function (m) { return m.server && m.server.writer ? m.server.writer.stall_max_seconds * 1000 : null; }) },
          { label: "queue max", values: perMinute(function (m) { return m.server && m.server.writer ? m.server.writer.queue_depth_max : null; }) },
          { label: "shed", values: perMinute(function (m) { return m.server && m.server.writer ? shed(m.server.writer) : null; }) },
        ], "");
      }
    }
    var steps = (data.stress && data.stress.steps) || [];
    if (steps.length) {
      chart("Stress steps", { label: "step rate", values: steps.map(function (s) { return s.rate; }) }, [
        { label: "p99 ms", values: steps.map(function (s) { return s.p99_ms; }) },
        { label: "achieved/s", values: steps.map(function (s) { return s.achieved_rate; }) },
      ], "");
    }
  }

  function tables() {
    var root = document.getElementById("tables");
    table(root, "Request types (corrected latency, ms)", ["type", "requests", "rate/s", "errors", "declines", "p50", "p90", "p95", "p99", "p99.9", "max", "svc p50", "svc p99"],
      keys(data.request_types).map(function (n) {
        var t = data.request_types[n], c = t.corrected, s = t.service;
        return [n, t.requests, fmt(t.rate, 1), { text: pct(t.error_rate), cls: t.errors ? "bad" : "" }, t.declines,
          fmt(c.p50_ms), fmt(c.p90_ms), fmt(c.p95_ms), fmt(c.p99_ms), fmt(c.p999_ms), fmt(c.max_ms), fmt(s.p50_ms), fmt(s.p99_ms)];
      }));
    table(root, "Scenarios (whole iterations, ms)", ["scenario", "iterations", "rate/s", "failed", "p50", "p95", "p99", "max"],
      keys(data.scenarios).map(function (n) {
        var s = data.scenarios[n], c = s.corrected;
        return [n, s.iterations, fmt(s.rate, 1), pct(s.error_rate), fmt(c.p50_ms), fmt(c.p95_ms), fmt(c.p99_ms), fmt(c.max_ms)];
      }));
    [["Status codes", data.status_codes], ["Error codes", data.error_codes], ["Failed checks", data.checks_failed]].forEach(function (p) {
      table(root, p[0], ["code", "count"], keys(p[1]).map(function (k) { return [k, p[1][k]]; }));
    });
    table(root, "Thresholds", ["threshold", "observed", "verdict"], (data.thresholds || []).map(function (t) {
      return [t.threshold, fmt(t.observed, 4), { text: t.ok ? "ok" : "BREACHED", cls: t.ok ? "ok" : "bad" }];
    }));
    if (data.stress) {
      table(root, "Stress steps (capacity " + fmt(data.stress.capacity_rate, 1) + "/s)", ["rate", "achieved", "p99 ms", "errors", "verdict"],
        data.stress.steps.map(function (s) {
          return [fmt(s.rate, 1), fmt(s.achieved_rate, 1), fmt(s.p99_ms), pct(s.error_rate), { text: s.held ? "held" : "broke: " + s.reason, cls: s.held ? "ok" : "bad" }];
        }));
    }
    table(root, "Per minute (corrected latency, ms)", ["minute", "requests", "sales", "refused", "p50", "p99", "worst 1 s p99", "max", "CPU %", "CPU us/req", "allocs/req", "RSS max MiB", "written/sale", "stored/sale", "longest commit ms", "queue max", "shed"],
      (data.minutes || []).map(function (m) {
        var s = m.server || {}, w = s.writer;
        return [m.minute, m.requests, m.sales, { text: String(m.refused), cls: m.refused ? "bad" : "" }, fmt(m.corrected.p50_ms), fmt(m.corrected.p99_ms),
          fmt(m.worst_second_p99_ms), fmt(m.corrected.max_ms), fmt(s.cpu_percent_avg, 0),
          s.cpu_us_per_request ? fmt(s.cpu_us_per_request, 1) : "", s.allocs_per_request ? fmt(s.allocs_per_request, 1) : "", s.rss_bytes_max ? fmt(s.rss_bytes_max / 1048576, 1) : "",
          s.write_bytes >= 0 && m.sales ? fmt(s.write_bytes_per_sale, 0) : "", s.data_dir_bytes_per_sale ? fmt(s.data_dir_bytes_per_sale, 0) : "",
          w ? fmt(w.stall_max_seconds * 1000, 0) : "", w ? w.queue_depth_max : "",
          w ? keys(w.shed || {}).map(function (k) { return k + " " + w.shed[k]; }).join(", ") || "0" : ""];
      }));
    var r = data.resources;
    table(root, "Resources", ["process", "source", "CPU avg %", "CPU max %", "RSS max MiB"], ["injector", "server"].map(function (p) {
      var s = r[p];
      return [p, s.source || "not sampled", fmt(s.cpu_percent_avg, 0), fmt(s.cpu_percent_max, 0), fmt(s.rss_bytes_max / 1048576, 1)];
    }));
  }

  summary();
  charts();
  tables();
  document.body.dataset.rendered = String(drawn);
})();
