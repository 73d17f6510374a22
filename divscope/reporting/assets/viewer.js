/* divscope: the token viewer, of the report and of notebooks (divscope.view). Hand-written, no
 * framework, no dependency, no network.
 *
 * Renders a JSON document (layout: divscope/reporting/data.py) into an element: a searchable,
 * sortable list of the included responses, a column chooser with its colour legend, the
 * selected response's tokens coloured by that column, a tooltip per token (hover or focus) and
 * keyboard navigation (n/p, j/k, arrows, Home/End, Escape). Every string from the data reaches
 * the DOM through textContent, never innerHTML. A report mounts one viewer by itself, from
 * <script id="divscope-data"> into <div id="viewer">; a notebook's output mounts its own with
 * divscopeViewer.mount(root, data, prefix), the prefix keeping each viewer's element ids apart.
 */
(function () {
  "use strict";

  // magma, reversed and cut at 0.18 (matplotlib's colormap sampled at 9 stops), starting from
  // white: lightness falls monotonically, so it reads in every form of colour blindness and in
  // greyscale; the low end is white, so most (low-divergence) tokens read as plain text.
  var STOPS = ["#ffffff", "#fcfdbf", "#fecd90", "#fe9d6c", "#f66c5c", "#db476a", "#b0357b", "#862781",
    "#5d177f", "#331067"];
  var SCALE_NAME = "magma (reversed; colour-blind-safe, light = low, dark = high)";
  var LABELS = {
    js: "Jensen-Shannon divergence (js)",
    ce_base_rl: "cross-entropy base→RL (ce_base_rl)",
    kl_base_rl: "KL(base‖RL) (kl_base_rl)",
    entropy_base: "base model entropy (entropy_base)"
  };
  var LIST_COLUMNS = [
    { key: "prompt_id", label: "prompt id", type: "text" },
    { key: "sample_id", label: "sample", type: "num" },
    { key: "correct", label: "correct", type: "bool" },
    { key: "n_tokens", label: "length", type: "num" },
    { key: "mean_js", label: "mean js", type: "num" },
    { key: "max_js", label: "max js", type: "num" },
    { key: "n_high", label: "# js > 0.1", type: "num" },
    { key: "why", label: "included as", type: "text" }
  ];

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (name) {
        if (attrs[name] !== null && attrs[name] !== undefined) {
          node.setAttribute(name, attrs[name]);
        }
      });
    }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function fmt(v) {
    if (v === null || v === undefined || (typeof v === "number" && !isFinite(v))) { return "–"; }
    if (typeof v !== "number") { return String(v); }
    if (v === 0) { return "0"; }
    if (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e5) { return v.toExponential(2); }
    return String(parseFloat(v.toPrecision(4)));
  }

  // A token's text made visible for the tooltip: spaces, tabs and newlines as symbols.
  function visible(s) {
    if (s === "") { return "∅ (empty)"; }
    // Leading and trailing spaces as ␣ (" the" → "␣the"); inner ones stay ("id 12").
    s = s.replace(/^ +| +$/g, function (m) { return m.replace(/ /g, "␣"); });
    return s.replace(/\t/g, "⇥").replace(/\r/g, "␍").replace(/\n/g, "↵");
  }

  function hexToRgb(hex) {
    return [parseInt(hex.slice(1, 3), 16), parseInt(hex.slice(3, 5), 16),
      parseInt(hex.slice(5, 7), 16)];
  }
  var STOP_RGB = STOPS.map(hexToRgb);

  function colour(t) {
    t = Math.max(0, Math.min(1, t));
    var x = t * (STOP_RGB.length - 1);
    var i = Math.min(Math.floor(x), STOP_RGB.length - 2);
    var f = x - i;
    var a = STOP_RGB[i];
    var b = STOP_RGB[i + 1];
    return [0, 1, 2].map(function (k) { return Math.round(a[k] + (b[k] - a[k]) * f); });
  }

  // WCAG relative luminance; dark text on light backgrounds, white text on dark ones.
  function luminance(rgb) {
    var c = rgb.map(function (v) {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  }

  function rgbCss(rgb) { return "rgb(" + rgb[0] + ", " + rgb[1] + ", " + rgb[2] + ")"; }

  function extent(values) {
    var lo = Infinity;
    var hi = -Infinity;
    for (var i = 0; i < values.length; i++) {
      var v = values[i];
      if (typeof v === "number" && isFinite(v)) {
        if (v < lo) { lo = v; }
        if (v > hi) { hi = v; }
      }
    }
    return lo <= hi ? [lo, hi] : [0, 0];
  }

  function hideEmptyNavLinks() {
    var links = document.querySelectorAll("nav.topnav a[href^='#']");
    Array.prototype.forEach.call(links, function (a) {
      if (!document.getElementById(a.getAttribute("href").slice(1))) {
        a.parentNode.hidden = true;
      }
    });
  }

  // The server-rendered tables write numbers and intervals ("0.12 [0.1, 0.14]") as text:
  // right-align those cells (tabular figures in the style sheet), so that CIs line up.
  var NUMERIC = /^(?:[-+−]?(?:\d[\d,]*\.?\d*(?:e[-+]?\d+)?|\.\d+)%?|n\/a|–|-)(?:\s*\[[^\]]*\])?$/i;
  function alignNumbers() {
    var cells = document.querySelectorAll("main table:not(.dv-responses):not(.kv) td");
    Array.prototype.forEach.call(cells, function (td) {
      if (!td.querySelector("table") && NUMERIC.test(td.textContent.trim())) {
        td.classList.add("num");
      }
    });
  }

  // The report's page: its one viewer, and the page's own touches. Elsewhere (a notebook's
  // output, which mounts its viewers itself) nothing.
  function start() {
    var source = document.getElementById("divscope-data");
    var root = document.getElementById("viewer");
    if (!source || !root) { return; }
    hideEmptyNavLinks();
    alignNumbers();
    mount(root, source, "dv-");
  }

  // Render the document of the element `source` (a <script type="application/json">) into
  // `root`; `prefix` starts the id of every element the viewer makes.
  function mount(root, source, prefix) {
    root.textContent = "";
    var doc;
    try {
      doc = JSON.parse(source ? source.textContent : "null");
    } catch (err) {
      root.appendChild(el("p", { "class": "viewer-error" },
        "The viewer's data could not be read: " + err.message));
      return;
    }
    if (!doc || !doc.responses || doc.responses.length === 0) {
      root.appendChild(el("p", { "class": "viewer-note" },
        "No response is embedded in this report, so the token viewer is empty."));
      return;
    }
    var viewer = new Viewer(root, doc, prefix);
    viewer.sortBy("max_js");
    viewer.select(viewer.order[0], false);
    return viewer;
  }

  function Viewer(root, doc, prefix) {
    this.root = root;
    this.prefix = prefix;
    this.doc = doc;
    this.strings = doc.strings || [];
    this.columns = (doc.columns && doc.columns.length) ? doc.columns : ["js"];
    this.column = this.columns[0];
    this.scope = "response";
    this.sortKey = null;
    this.sortDir = 1;
    this.filter = "";
    this.current = -1;
    this.focusIndex = 0;
    this.tipFor = -1;
    this.globalExtent = {};
    var self = this;
    this.columns.forEach(function (c) {
      var lo = Infinity;
      var hi = -Infinity;
      doc.responses.forEach(function (r) {
        var e = extent(r[c] || []);
        if (e[0] < lo) { lo = e[0]; }
        if (e[1] > hi) { hi = e[1]; }
      });
      self.globalExtent[c] = lo <= hi ? [lo, hi] : [0, 0];
    });
    this.build();
  }

  Viewer.prototype.threshold = function () {
    var t = this.doc.thresholds && this.doc.thresholds[this.column];
    return typeof t === "number" ? t : null;
  };

  Viewer.prototype.build = function () {
    var self = this;
    var doc = this.doc;
    var inc = doc.included || {};

    if (inc.rule || inc.responses_total !== undefined) {
      var what = "Embedded: " + doc.responses.length + " of " +
        (inc.responses_total !== undefined ? inc.responses_total : "?") + " responses";
      if (inc.rule) { what += " — " + inc.rule; }
      if (inc.seed !== undefined) { what += " (seed " + inc.seed + ")"; }
      this.root.appendChild(el("p", { "class": "viewer-note" }, what + "."));
    }

    // Response list: filter, count, sortable table.
    var listBox = el("div", { "class": "viewer-list" });
    var filterLabel = el("label", { "for": this.prefix + "filter" }, "Filter by prompt id ");
    this.filterInput = el("input", {
      id: this.prefix + "filter", type: "search", placeholder: "e.g. p12", autocomplete: "off",
      "aria-controls": this.prefix + "responses"
    });
    this.countNote = el("span", { "class": "dv-count", "aria-live": "polite" });
    var filterRow = el("div", { "class": "dv-filter-row" });
    filterLabel.appendChild(this.filterInput);
    filterRow.appendChild(filterLabel);
    filterRow.appendChild(this.countNote);
    listBox.appendChild(filterRow);

    var scroller = el("div", { "class": "dv-table-scroll" });
    var table = el("table", {
      id: this.prefix + "responses", "class": "dv-responses", role: "grid",
      "aria-readonly": "true",
      "aria-label": "Embedded responses: Enter or Space selects one, arrow keys move"
    });
    var thead = el("thead");
    var hrow = el("tr");
    this.headers = {};
    LIST_COLUMNS.forEach(function (col) {
      var th = el("th", { scope: "col", "aria-sort": "none", "class": "dv-" + col.type });
      var btn = el("button", { type: "button", "class": "dv-sort", "data-key": col.key });
      btn.appendChild(el("span", null, col.label));
      btn.appendChild(el("span", { "class": "dv-arrow", "aria-hidden": "true" }, ""));
      btn.addEventListener("click", function () { self.sortBy(col.key); });
      th.appendChild(btn);
      hrow.appendChild(th);
      self.headers[col.key] = th;
    });
    thead.appendChild(hrow);
    table.appendChild(thead);
    this.tbody = el("tbody");
    table.appendChild(this.tbody);
    scroller.appendChild(table);
    listBox.appendChild(scroller);
    this.root.appendChild(listBox);

    this.rows = doc.responses.map(function (r, i) {
      var tr = el("tr", {
        tabindex: "-1", role: "row", "aria-selected": "false", "data-index": String(i)
      });
      LIST_COLUMNS.forEach(function (col) {
        var v = r[col.key];
        var text;
        if (col.type === "bool") {
          text = v === true ? "yes" : (v === false ? "no" : "–");
        } else if (col.type === "num") {
          text = fmt(v);
        } else {
          text = v === null || v === undefined ? "–" : String(v);
        }
        tr.appendChild(el("td", { role: "gridcell", "class": "dv-" + col.type }, text));
      });
      tr.addEventListener("click", function () { self.select(i, true); });
      tr.addEventListener("keydown", function (ev) { self.onRowKey(ev, i); });
      return tr;
    });
    this.order = doc.responses.map(function (_, i) { return i; });
    this.renderList();

    this.filterInput.addEventListener("input", function () {
      self.filter = self.filterInput.value.trim().toLowerCase();
      self.renderList();
    });

    // Controls: column chooser, scale scope, legend.
    var controls = el("div", { "class": "dv-controls" });
    var colLabel = el("label", { "for": this.prefix + "column" }, "Colour by ");
    this.columnSelect = el("select", { id: this.prefix + "column" });
    this.columns.forEach(function (c) {
      self.columnSelect.appendChild(el("option", { value: c }, LABELS[c] || c));
    });
    colLabel.appendChild(this.columnSelect);
    controls.appendChild(colLabel);
    var scopeLabel = el("label", { "for": this.prefix + "scope" }, "Scale over ");
    this.scopeSelect = el("select", { id: this.prefix + "scope" });
    this.scopeSelect.appendChild(el("option", { value: "response" }, "this response"));
    this.scopeSelect.appendChild(el("option", { value: "all" }, "all embedded responses"));
    scopeLabel.appendChild(this.scopeSelect);
    controls.appendChild(scopeLabel);
    this.root.appendChild(controls);

    this.legend = el("div", { "class": "dv-legend" });
    this.root.appendChild(this.legend);

    this.columnSelect.addEventListener("change", function () {
      self.column = self.columnSelect.value;
      self.recolour();
    });
    this.scopeSelect.addEventListener("change", function () {
      self.scope = self.scopeSelect.value;
      self.recolour();
    });

    this.root.appendChild(el("p", { "class": "dv-help", id: this.prefix + "help" },
      "Keys, on a token: n / j next token above the threshold, p / k previous one, " +
      "← → ↑ ↓ previous / next token, Home / End first / last, Escape hides the details. " +
      "Hover or focus a token for its details."));

    this.heading = el("h3", { "class": "dv-heading", id: this.prefix + "heading" });
    this.root.appendChild(this.heading);
    this.tokens = el("div", {
      "class": "dv-tokens", id: this.prefix + "tokens", role: "group",
      "aria-labelledby": this.prefix + "heading", "aria-describedby": this.prefix + "help"
    });
    this.root.appendChild(this.tokens);
    this.status = el("p", {
      "class": "dv-status", "aria-live": "polite", id: this.prefix + "status"
    });
    this.root.appendChild(this.status);

    this.tip = el("div", { id: this.prefix + "tooltip", role: "tooltip", "class": "dv-tooltip" });
    this.tip.hidden = true;
    document.body.appendChild(this.tip);

    this.tokens.addEventListener("keydown", function (ev) { self.onTokenKey(ev); });
    this.tokens.addEventListener("focusin", function (ev) {
      var i = self.tokenIndex(ev.target);
      if (i >= 0) { self.setFocusIndex(i); self.showTip(i); }
    });
    this.tokens.addEventListener("focusout", function (ev) {
      var i = self.tokenIndex(ev.target);
      if (i >= 0) { ev.target.removeAttribute("aria-describedby"); }
      if (!self.tokens.contains(ev.relatedTarget)) { self.hideTip(); }
    });
    this.tokens.addEventListener("mouseover", function (ev) {
      var i = self.tokenIndex(ev.target);
      if (i >= 0) { self.showTip(i); }
    });
    this.tokens.addEventListener("mouseleave", function () {
      var i = self.tokenIndex(document.activeElement);
      if (i >= 0) { self.showTip(i); } else { self.hideTip(); }
    });
    this.tokens.addEventListener("scroll", function () { self.hideTip(); });
    document.addEventListener("keydown", function (ev) {
      if (ev.key === "Escape" || ev.key === "Esc") { self.hideTip(); }
    });
    window.addEventListener("resize", function () { self.hideTip(); });
  };

  Viewer.prototype.tokenIndex = function (node) {
    if (!node || !node.classList || !node.classList.contains("tok")) { return -1; }
    return parseInt(node.getAttribute("data-i"), 10);
  };

  Viewer.prototype.sortBy = function (key) {
    if (this.sortKey === key) {
      this.sortDir = -this.sortDir;
    } else {
      this.sortKey = key;
      var type = LIST_COLUMNS.filter(function (c) { return c.key === key; })[0].type;
      this.sortDir = type === "num" ? -1 : 1;  // numbers: largest first
    }
    var rs = this.doc.responses;
    var dir = this.sortDir;
    var collator = typeof Intl !== "undefined" ?
      new Intl.Collator("en", { numeric: true }) : null;
    this.order = rs.map(function (_, i) { return i; }).sort(function (a, b) {
      var x = rs[a][key];
      var y = rs[b][key];
      var xn = x === null || x === undefined;
      var yn = y === null || y === undefined;
      if (xn || yn) { return xn === yn ? a - b : (xn ? 1 : -1); }  // missing last
      var c;
      if (typeof x === "string") {
        c = collator ? collator.compare(x, y) : (x < y ? -1 : (x > y ? 1 : 0));
      } else {
        c = (x === y) ? 0 : (x < y ? -1 : 1);
      }
      return c !== 0 ? c * dir : a - b;
    });
    var self = this;
    LIST_COLUMNS.forEach(function (col) {
      var th = self.headers[col.key];
      var active = col.key === key;
      th.setAttribute("aria-sort", active ? (dir > 0 ? "ascending" : "descending") : "none");
      th.querySelector(".dv-arrow").textContent = active ? (dir > 0 ? " ▲" : " ▼") : "";
    });
    this.renderList();
  };

  Viewer.prototype.visibleRows = function () {
    var self = this;
    return this.order.filter(function (i) {
      if (!self.filter) { return true; }
      return String(self.doc.responses[i].prompt_id).toLowerCase().indexOf(self.filter) >= 0;
    });
  };

  Viewer.prototype.renderList = function () {
    var self = this;
    var shown = this.visibleRows();
    this.tbody.textContent = "";
    shown.forEach(function (i) { self.tbody.appendChild(self.rows[i]); });
    this.countNote.textContent = shown.length + " of " + this.doc.responses.length +
      " responses shown";
    // Keep one row reachable with Tab: the selected one if shown, else the first shown.
    this.rows.forEach(function (tr) { tr.setAttribute("tabindex", "-1"); });
    var target = shown.indexOf(this.current) >= 0 ? this.current : shown[0];
    if (target !== undefined) { this.rows[target].setAttribute("tabindex", "0"); }
  };

  Viewer.prototype.onRowKey = function (ev, i) {
    var shown = this.visibleRows();
    var at = shown.indexOf(i);
    var next = null;
    if (ev.key === "Enter" || ev.key === " " || ev.key === "Spacebar") {
      ev.preventDefault();
      this.select(i, true);
      return;
    }
    if (ev.key === "ArrowDown") { next = shown[Math.min(at + 1, shown.length - 1)]; }
    if (ev.key === "ArrowUp") { next = shown[Math.max(at - 1, 0)]; }
    if (ev.key === "Home") { next = shown[0]; }
    if (ev.key === "End") { next = shown[shown.length - 1]; }
    if (next !== null && next !== undefined) {
      ev.preventDefault();
      this.rows.forEach(function (tr) { tr.setAttribute("tabindex", "-1"); });
      this.rows[next].setAttribute("tabindex", "0");
      this.rows[next].focus();
    }
  };

  Viewer.prototype.select = function (i, fromUser) {
    var r = this.doc.responses[i];
    if (!r) { return; }
    if (this.current >= 0) { this.rows[this.current].setAttribute("aria-selected", "false"); }
    this.current = i;
    this.rows[i].setAttribute("aria-selected", "true");
    this.renderList();
    if (fromUser) { this.rows[i].focus(); }
    this.hideTip();
    this.focusIndex = 0;
    var correct = r.correct === true ? "correct" : (r.correct === false ? "incorrect" : "ungraded");
    this.heading.textContent = "Prompt " + r.prompt_id + ", sample " + r.sample_id + " — " +
      r.n_tokens + " tokens, " + correct + ", mean js " + fmt(r.mean_js) + ", max js " +
      fmt(r.max_js);
    var frag = document.createDocumentFragment();
    var ids = r.token || [];
    for (var t = 0; t < ids.length; t++) {
      var text = this.strings[ids[t]];
      if (text === undefined || text === null) { text = ""; }
      var span = el("span", { "class": "tok", tabindex: t === 0 ? "0" : "-1", "data-i": String(t) });
      span.textContent = text;
      if (text === "") {
        span.classList.add("tok-empty");
      } else if (/^\s+$/.test(text)) {
        span.classList.add("tok-ws");
      }
      if (text.indexOf("\n") >= 0) { span.classList.add("tok-nl"); }
      frag.appendChild(span);
    }
    this.tokens.textContent = "";
    this.tokens.appendChild(frag);
    this.spans = this.tokens.querySelectorAll(".tok");
    this.status.textContent = "";
    this.recolour();
  };

  Viewer.prototype.range = function () {
    var r = this.doc.responses[this.current];
    return this.scope === "all" ? this.globalExtent[this.column] : extent(r[this.column] || []);
  };

  Viewer.prototype.recolour = function () {
    var r = this.doc.responses[this.current];
    if (!r) { return; }
    var values = r[this.column] || [];
    var ext = this.range();
    var lo = ext[0];
    var span = ext[1] - ext[0];
    for (var t = 0; t < this.spans.length; t++) {
      var v = values[t];
      var node = this.spans[t];
      if (typeof v !== "number" || !isFinite(v)) {
        node.style.backgroundColor = "";
        node.style.color = "";
        node.classList.add("tok-na");
        continue;
      }
      node.classList.remove("tok-na");
      var rgb = colour(span > 0 ? (v - lo) / span : 0);
      node.style.backgroundColor = rgbCss(rgb);
      node.style.color = luminance(rgb) > 0.18 ? "#111111" : "#ffffff";
    }
    this.renderLegend(ext, values);
    if (this.tipFor >= 0 && !this.tip.hidden) { this.showTip(this.tipFor); }
  };

  Viewer.prototype.renderLegend = function (ext, values) {
    this.legend.textContent = "";
    var thr = this.threshold();
    var above = 0;
    if (thr !== null) {
      values.forEach(function (v) { if (typeof v === "number" && v > thr) { above++; } });
    }
    this.legend.appendChild(el("span", { "class": "dv-legend-end" }, fmt(ext[0])));
    var bar = el("span", { "class": "dv-legend-bar", role: "img",
      "aria-label": "Colour scale from " + fmt(ext[0]) + " (light) to " + fmt(ext[1]) + " (dark)" });
    bar.style.backgroundImage = "linear-gradient(to right, " + STOPS.join(", ") + ")";
    if (thr !== null && ext[1] > ext[0] && thr >= ext[0] && thr <= ext[1]) {
      var mark = el("span", { "class": "dv-legend-mark", title: "threshold " + fmt(thr) });
      mark.style.left = (100 * (thr - ext[0]) / (ext[1] - ext[0])) + "%";
      bar.appendChild(mark);
    }
    this.legend.appendChild(bar);
    this.legend.appendChild(el("span", { "class": "dv-legend-end" }, fmt(ext[1])));
    var scope = this.scope === "all" ? "all embedded responses" : "this response";
    var text = (LABELS[this.column] || this.column) + ": " + SCALE_NAME + ", min → max over " +
      scope + ".";
    if (thr !== null) {
      text += " Threshold " + fmt(thr) + " (marked on the scale): " + above + " of " +
        values.length + " tokens above it; n / p jump between them.";
    }
    this.legend.appendChild(el("p", { "class": "dv-legend-text" }, text));
  };

  Viewer.prototype.setFocusIndex = function (i) {
    if (!this.spans || !this.spans[i]) { return; }
    if (this.spans[this.focusIndex]) { this.spans[this.focusIndex].setAttribute("tabindex", "-1"); }
    this.focusIndex = i;
    this.spans[i].setAttribute("tabindex", "0");
  };

  Viewer.prototype.focusToken = function (i) {
    if (!this.spans || !this.spans[i]) { return; }
    this.setFocusIndex(i);
    this.spans[i].focus();
    if (this.spans[i].scrollIntoView) { this.spans[i].scrollIntoView({ block: "nearest" }); }
    this.showTip(i);
  };

  Viewer.prototype.jump = function (from, dir) {
    var r = this.doc.responses[this.current];
    var values = r[this.column] || [];
    var thr = this.threshold();
    if (thr === null) {
      this.status.textContent = "No threshold is set for " + this.column + ".";
      return;
    }
    for (var t = from + dir; t >= 0 && t < values.length; t += dir) {
      if (typeof values[t] === "number" && values[t] > thr) {
        this.focusToken(t);
        this.status.textContent = "Token " + t + ": " + this.column + " " + fmt(values[t]) +
          " > " + fmt(thr) + ".";
        return;
      }
    }
    this.status.textContent = "No " + (dir > 0 ? "later" : "earlier") + " token with " +
      this.column + " above " + fmt(thr) + ".";
  };

  Viewer.prototype.onTokenKey = function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    var i = this.tokenIndex(ev.target);
    if (i < 0) { return; }
    var n = this.spans.length;
    switch (ev.key) {
      case "n": case "j": case "N": case "J":
        ev.preventDefault(); this.jump(i, 1); break;
      case "p": case "k": case "P": case "K":
        ev.preventDefault(); this.jump(i, -1); break;
      case "ArrowRight": case "ArrowDown":
        ev.preventDefault(); this.focusToken(Math.min(i + 1, n - 1)); break;
      case "ArrowLeft": case "ArrowUp":
        ev.preventDefault(); this.focusToken(Math.max(i - 1, 0)); break;
      case "Home":
        ev.preventDefault(); this.focusToken(0); break;
      case "End":
        ev.preventDefault(); this.focusToken(n - 1); break;
      case "Escape": case "Esc":
        this.hideTip(); break;
      default:
    }
  };

  Viewer.prototype.row = function (label, value, strong) {
    var dt = el("dt", null, label);
    var dd = el("dd", strong ? { "class": "dv-chosen" } : null, value);
    return [dt, dd];
  };

  Viewer.prototype.showTip = function (i) {
    var r = this.doc.responses[this.current];
    var node = this.spans && this.spans[i];
    if (!r || !node) { return; }
    var s = this.strings;
    var pick = function (name) { var a = r[name]; return a ? a[i] : undefined; };
    var str = function (name) {
      var idx = pick(name);
      var v = idx === undefined || idx === null ? undefined : s[idx];
      return v === undefined ? "–" : "“" + visible(v) + "”";
    };
    var tip = this.tip;
    tip.textContent = "";
    tip.appendChild(el("div", { "class": "dv-tip-title" },
      "Position " + i + " (from 0, of " + r.n_tokens + "): “" + visible(s[r.token[i]] || "") +
      "”"));
    var dl = el("dl");
    var self = this;
    var rows = [
      ["base top-1", str("top1_base")],
      ["RL top-1", str("top1_rl")],
      ["RL top-1 under base", "rank " + fmt(pick("rl_top1_rank_in_base")) + ", p = " +
        fmt(pick("p_base_of_rl_top1"))],
      ["entropy base / RL", fmt(pick("entropy_base")) + " / " + fmt(pick("entropy_rl")) + " nats"]
    ];
    this.columns.forEach(function (c) {
      if (c === "entropy_base" && c !== self.column) { return; }  // already in the line above
      rows.push([c, fmt(pick(c)), c === self.column]);
    });
    rows.forEach(function (row) {
      self.row(row[0], row[1], row[2]).forEach(function (n) { dl.appendChild(n); });
    });
    tip.appendChild(dl);
    tip.hidden = false;
    this.tipFor = i;
    if (document.activeElement === node) {
      node.setAttribute("aria-describedby", this.prefix + "tooltip");
    }
    var rect = node.getBoundingClientRect();
    var width = tip.offsetWidth;
    var left = rect.left + window.pageXOffset;
    var maxLeft = window.pageXOffset + document.documentElement.clientWidth - width - 8;
    left = Math.max(window.pageXOffset + 8, Math.min(left, maxLeft));
    var top = rect.bottom + window.pageYOffset + 6;
    if (rect.bottom + tip.offsetHeight + 12 > window.innerHeight &&
        rect.top - tip.offsetHeight - 6 > 0) {
      top = rect.top + window.pageYOffset - tip.offsetHeight - 6;
    }
    tip.style.left = left + "px";
    tip.style.top = top + "px";
  };

  Viewer.prototype.hideTip = function () {
    this.tip.hidden = true;
    this.tipFor = -1;
  };

  window.divscopeViewer = { mount: mount };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
}());
