// bertgraph's interactive diagram viewer: depths, pan and zoom (mouse, keys, touch), search, node details.
// Plain JavaScript with no dependencies. Nothing from the model is ever parsed as markup: the
// drawings arrive as data ([tag, attributes, ...children]) and are built with DOM calls, and
// every piece of text is set with textContent (the page's policy requires Trusted Types, so the
// browser refuses innerHTML outright). The URL fragment keeps depth, selection and search.
"use strict";
(() => {
  const data = JSON.parse(document.getElementById("bertgraph-data").textContent);
  const $ = (id) => document.getElementById(id);
  const stage = $("stage"), canvas = $("canvas"), status = $("status");
  const search = $("search"), matches = $("matches"), panel = $("panel");
  const levels = new Map();  // depth -> {drawing, nodes, title, subtitle, sizes} once unpacked
  const state = { depth: data.depth, node: "", query: "", theme: document.documentElement.dataset.theme };
  const view = { scale: 1, x: 0, y: 0 };
  const READABLE_PX = 10;  // the smallest text is at least this tall wherever the viewer places the drawing
  const MARGIN = 8;
  let shown = null;   // {depth, svg element, nodes, smallest}
  let hits = [], hit = -1;
  const number = new Intl.NumberFormat("en-US");

  // --- unpacking ------------------------------------------------------------------------
  function bytesOf(base64) {
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(base64);
    const binary = atob(base64), bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  }
  async function unpack(depth) {
    if (!levels.has(depth)) {
      const entry = data.levels[depth];
      const stream = new Blob([bytesOf(entry.bundle)]).stream().pipeThrough(new DecompressionStream("gzip"));
      levels.set(depth, JSON.parse(await new Response(stream).text()));
    }
    return levels.get(depth);
  }
  // The drawing's elements: only what Graphviz writes for a diagram, no handler, no link.
  const SVG_NS = "http://www.w3.org/2000/svg", XLINK_NS = "http://www.w3.org/1999/xlink";
  const TAGS = new Set(["svg", "g", "title", "text", "tspan", "path", "polygon", "polyline", "ellipse", "circle",
    "rect", "line", "a", "defs", "linearGradient", "radialGradient", "stop"]);
  function build([tag, attributes, ...children]) {
    if (!TAGS.has(tag)) throw new Error(`a drawing has no <${tag}> element`);
    const node = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (/^on|href$|^style$/i.test(name)) continue;
      if (name === "xlink:title") node.setAttributeNS(XLINK_NS, name, value);
      else node.setAttribute(name, value);
    }
    for (const child of children) node.append(typeof child === "string" ? child : build(child));
    return node;
  }

  // --- the URL fragment ---------------------------------------------------------------
  function readFragment() {
    const params = new URLSearchParams(location.hash.slice(1));
    const depth = Number.parseInt(params.get("depth") ?? "", 10);
    if (depth >= 0 && depth < data.levels.length) state.depth = depth;
    state.node = params.get("node") ?? "";
    state.query = params.get("q") ?? "";
    const theme = params.get("theme");
    if (theme === "auto" || theme === "light" || theme === "dark") state.theme = theme;
  }
  function writeFragment() {
    const params = new URLSearchParams();
    params.set("depth", String(state.depth));
    if (state.node) params.set("node", state.node);
    if (state.query) params.set("q", state.query);
    if (state.theme !== data.theme) params.set("theme", state.theme);
    const fragment = "#" + params.toString();
    if (fragment === location.hash) return;
    try {
      history.replaceState(null, "", fragment);
    } catch (error) {
      // A sandboxed iframe may refuse; the page works the same without it.
    }
  }

  // --- pan and zoom -------------------------------------------------------------------
  function apply() {
    canvas.style.transform = `translate(${view.x}px, ${view.y}px) scale(${view.scale})`;
  }
  function size() {
    const svg = shown && shown.svg;
    if (!svg) return { width: 1, height: 1 };
    return { width: svg.width.baseVal.value || 1, height: svg.height.baseVal.value || 1 };
  }
  // The smallest font of the drawing's text, in CSS px at zoom 1 (Graphviz writes points). Graphviz
  // puts every text under one transform, so one text of each font size is measured.
  function smallestText() {
    let smallest = Infinity;
    const bySize = new Map();
    for (const text of shown.svg.querySelectorAll("text")) {
      const size = text.getAttribute("font-size");
      if (!bySize.has(size) && text.textContent.trim()) bySize.set(size, text);
    }
    for (const text of bySize.values()) {
      const matrix = text.getScreenCTM();
      const px = parseFloat(getComputedStyle(text).fontSize) * (matrix ? Math.hypot(matrix.a, matrix.b) : 1);
      if (px > 0) smallest = Math.min(smallest, px / view.scale);
    }
    return Number.isFinite(smallest) ? smallest : READABLE_PX;
  }
  function readable() {
    return (READABLE_PX / shown.smallest) * 1.001;  // a hair above, so rounding never lands below
  }
  // Where a drawn element is at zoom 1, relative to the drawing's corner.
  function placeOf(element) {
    const box = stage.getBoundingClientRect(), rect = element.getBoundingClientRect();
    const x = (rect.left - box.left - view.x) / view.scale, y = (rect.top - box.top - view.y) / view.scale;
    return { x, y, width: rect.width / view.scale, height: rect.height / view.scale };
  }
  // The flow's first boxes: the inputs drawn highest (or the highest box when there is none).
  function flowStart() {
    const elements = nodeElements().filter((element) => shown.nodes[idOf(element)]);
    const inputs = elements.filter((element) => shown.nodes[idOf(element)].role === "input");
    const places = (inputs.length ? inputs : elements).map(placeOf);
    if (!places.length) return null;
    const top = Math.min(...places.map((place) => place.y));
    return places.filter((place) => place.y <= top + 1).sort((a, b) => a.x - b.x);
  }
  // Opening view: the whole drawing when its text is readable so, else readable text at the top of
  // the flow (the inputs), the drawing's top edge at the top and no empty space beside it.
  function start() {
    const box = stage.getBoundingClientRect(), { width, height } = size();
    const whole = Math.min((box.width - 2 * MARGIN) / width, (box.height - 2 * MARGIN) / height);
    const first = flowStart();  // measured under the view the boxes are drawn with, before it changes
    view.scale = Math.max(readable(), Math.min(1, whole));
    const drawn = { width: width * view.scale, height: height * view.scale };
    if (drawn.width <= box.width - 2 * MARGIN) {
      view.x = (box.width - drawn.width) / 2;
    } else {
      let left = 0, right = width;
      if (first) {
        const last = first[first.length - 1];
        left = first[0].x;
        right = last.x + last.width;
        if ((right - left) * view.scale > box.width - 2 * MARGIN) right = first[0].x + first[0].width;
      }
      const x = box.width / 2 - ((left + right) / 2) * view.scale;
      view.x = Math.min(MARGIN, Math.max(box.width - MARGIN - drawn.width, x));
    }
    view.y = drawn.height <= box.height - 2 * MARGIN ? (box.height - drawn.height) / 2 : MARGIN;
    apply();
  }
  function fitWhole() {
    const box = stage.getBoundingClientRect(), { width, height } = size();
    view.scale = Math.max(0.02, Math.min(1, (box.width - 2 * MARGIN) / width, (box.height - 2 * MARGIN) / height));
    view.x = (box.width - width * view.scale) / 2;
    view.y = (box.height - height * view.scale) / 2;
    apply();
  }
  function zoomTo(scale, x, y) {
    scale = Math.min(8, Math.max(0.02, scale));
    view.x = x - (x - view.x) * (scale / view.scale);
    view.y = y - (y - view.y) * (scale / view.scale);
    view.scale = scale;
    apply();
  }
  function zoom(factor, cx, cy) {
    const box = stage.getBoundingClientRect();
    zoomTo(view.scale * factor, cx ?? box.width / 2, cy ?? box.height / 2);
  }
  // Bring a box into the middle of the stage, at a zoom where its text is readable.
  function centre(element) {
    const box = stage.getBoundingClientRect(), place = placeOf(element);
    view.scale = Math.max(view.scale, readable());
    view.x = box.width / 2 - (place.x + place.width / 2) * view.scale;
    view.y = box.height / 2 - (place.y + place.height / 2) * view.scale;
    apply();
  }

  // Mouse, pen and touch alike: one pointer pans, two pinch (zoom about their midpoint).
  const pointers = new Map();  // pointerId -> {x, y} in stage coordinates
  let drag = null, pinch = null, moved = false;
  function stagePoint(event) {
    const box = stage.getBoundingClientRect();
    return { x: event.clientX - box.left, y: event.clientY - box.top };
  }
  function startDrag() {
    const [point] = pointers.values();
    drag = point ? { x: point.x, y: point.y, vx: view.x, vy: view.y } : null;
  }
  function startPinch() {
    const [a, b] = pointers.values();
    const middle = { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 };
    pinch = {
      distance: Math.max(1, Math.hypot(a.x - b.x, a.y - b.y)), scale: view.scale,
      at: { x: (middle.x - view.x) / view.scale, y: (middle.y - view.y) / view.scale },
    };
  }
  stage.addEventListener("pointerdown", (event) => {
    if (event.pointerType === "mouse" && event.button !== 0) return;
    if (!pointers.size) moved = false;
    pointers.set(event.pointerId, stagePoint(event));
    if (pointers.size === 2) {
      drag = null;
      startPinch();
      moved = true;
    } else if (pointers.size === 1) startDrag();
  });
  stage.addEventListener("pointermove", (event) => {
    if (!pointers.has(event.pointerId)) return;
    pointers.set(event.pointerId, stagePoint(event));
    if (pinch && pointers.size >= 2) {
      const [a, b] = pointers.values();
      const scale = Math.min(8, Math.max(0.02, pinch.scale * Math.hypot(a.x - b.x, a.y - b.y) / pinch.distance));
      view.scale = scale;
      view.x = (a.x + b.x) / 2 - pinch.at.x * scale;
      view.y = (a.y + b.y) / 2 - pinch.at.y * scale;
      apply();
      return;
    }
    if (!drag) return;
    const point = pointers.get(event.pointerId);
    const dx = point.x - drag.x, dy = point.y - drag.y;
    if (!moved && Math.hypot(dx, dy) < 4) return;
    if (!moved) {
      moved = true;
      stage.classList.add("dragging");
      if (event.pointerType === "mouse") stage.setPointerCapture(event.pointerId);
    }
    view.x = drag.vx + dx;
    view.y = drag.vy + dy;
    apply();
  });
  function endPointer(event) {
    if (!pointers.delete(event.pointerId)) return;
    pinch = null;
    if (pointers.size === 1) startDrag();  // the finger left on the glass pans on from here
    if (pointers.size) return;
    drag = null;
    stage.classList.remove("dragging");
  }
  stage.addEventListener("pointerup", endPointer);
  stage.addEventListener("pointercancel", endPointer);
  stage.addEventListener("wheel", (event) => {
    event.preventDefault();
    const point = stagePoint(event);
    zoom(Math.exp(-event.deltaY * 0.0015), point.x, point.y);
  }, { passive: false });
  stage.addEventListener("keydown", (event) => {
    if (event.target !== stage) return;
    const step = 60, moves = { ArrowLeft: [step, 0], ArrowRight: [-step, 0], ArrowUp: [0, step], ArrowDown: [0, -step] };
    if (moves[event.key]) {
      view.x += moves[event.key][0];
      view.y += moves[event.key][1];
      apply();
    } else if (event.key === "+" || event.key === "=") zoom(1.25);
    else if (event.key === "-") zoom(0.8);
    else if (event.key === "0") fitWhole();
    else if (event.key === "Home") start();
    else return;
    event.preventDefault();
  });
  $("zoom-in").addEventListener("click", () => zoom(1.25));
  $("zoom-out").addEventListener("click", () => zoom(0.8));
  $("zoom-fit").addEventListener("click", () => fitWhole());

  // --- drawing a depth ----------------------------------------------------------------
  function nodeElements() {
    return shown ? Array.from(canvas.querySelectorAll("g.node")) : [];
  }
  function idOf(element) {
    return element.getAttribute("id") || "";  // the stable id Graphviz copies from the DOT (render/ids.py)
  }
  function elementOf(id) {
    return nodeElements().find((element) => idOf(element) === id) || null;
  }
  async function showDepth(depth) {
    const level = await unpack(depth);
    const svg = build(level.drawing);
    canvas.replaceChildren(svg);
    shown = { depth, svg, nodes: level.nodes, sizes: level.sizes };
    for (const element of nodeElements()) {
      const details = shown.nodes[idOf(element)];
      if (!details) continue;
      element.setAttribute("tabindex", "0");
      element.setAttribute("role", "button");
      element.setAttribute("aria-label", `${details.title}${details.type ? " (" + details.type + ")" : ""}`);
    }
    shown.smallest = smallestText();
    state.depth = depth;
    for (const button of $("depths").children) {
      button.setAttribute("aria-pressed", String(Number(button.dataset.depth) === depth));
    }
    $("title").textContent = level.title;
    $("title").title = level.subtitle;
    document.title = level.title;
    start();
    status.textContent = `depth ${depth} · ${Object.keys(level.nodes).length} boxes`;
    if (state.node && !shown.nodes[state.node]) state.node = "";
    select(state.node, Boolean(state.node));
    runSearch(!state.node);
    writeFragment();
  }

  // --- search -------------------------------------------------------------------------
  function haystack(details) {
    return [details.title, details.path, details.module, details.type, details.op, ...(details.ops || [])]
      .filter(Boolean).join(" ").toLowerCase();
  }
  function matching(nodes, query) {
    return Object.keys(nodes).filter((id) => haystack(nodes[id]).includes(query));
  }
  async function otherDepths(query) {
    const found = [];
    for (let depth = 0; depth < data.levels.length; depth++) {
      if (depth === state.depth) continue;
      const count = matching((await unpack(depth)).nodes, query).length;
      if (count) found.push([depth, count]);
    }
    return found;
  }
  function plural(count, one, many) {
    return `${number.format(count)} ${count === 1 ? one : many}`;
  }
  // No match at this depth: say so, and offer each depth that has one (a button that goes there).
  function offerDepths(found) {
    matches.replaceChildren(element("span", found.length ? "none at this depth; " : "no match at any depth"));
    for (const [depth, count] of found) {
      const button = element("button", `depth ${depth}: ${plural(count, "match", "matches")}`, "offer");
      button.type = "button";
      button.dataset.depth = String(depth);
      button.addEventListener("click", () => showDepth(depth));
      matches.append(button);
    }
  }
  function runSearch(move) {
    const query = state.query.trim().toLowerCase();
    for (const element of nodeElements()) element.classList.remove("match", "current");
    canvas.classList.toggle("searching", Boolean(query));
    hits = [];
    hit = -1;
    if (!query) {
      matches.replaceChildren();
      return;
    }
    const found = new Set(matching(shown.nodes, query));
    hits = nodeElements().filter((element) => found.has(idOf(element)));
    for (const element of hits) element.classList.add("match");
    matches.textContent = plural(hits.length, "match", "matches");
    if (!hits.length) {
      const asked = state.query, depth = state.depth;
      otherDepths(query).then((others) => {
        if (state.query === asked && state.depth === depth) offerDepths(others);
      });
      return;
    }
    if (move) next(1);
  }
  function next(step) {
    if (!hits.length) return;
    if (hit >= 0) hits[hit].classList.remove("current");
    hit = (hit + step + hits.length) % hits.length;
    hits[hit].classList.add("current");
    centre(hits[hit]);
    matches.textContent = `${number.format(hit + 1)} of ${plural(hits.length, "match", "matches")}`;
  }
  search.addEventListener("input", () => {
    state.query = search.value;
    runSearch(true);
    writeFragment();
  });
  search.addEventListener("keydown", (event) => {
    if (event.key !== "Enter") return;
    event.preventDefault();
    if (!hits.length) return;
    next(event.shiftKey ? -1 : 1);
  });

  // --- details ------------------------------------------------------------------------
  function element(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (className) node.className = className;
    return node;
  }
  function shape(dims) {
    return "[" + dims.join(", ") + "]";
  }
  // Large counts in words first, exact figure after: "23.4 million (23,440,896)".
  const SCALES = [[1e12, "trillion"], [1e9, "billion"], [1e6, "million"], [1e3, "thousand"]];
  const BINARY = [[2 ** 40, "TiB"], [2 ** 30, "GiB"], [2 ** 20, "MiB"], [2 ** 10, "KiB"]];
  function rounded(value) {
    return Number(value.toPrecision(3)).toString();
  }
  function count(value) {
    const exact = number.format(value);
    const scale = Math.abs(value) >= 1e4 && SCALES.find(([size]) => Math.abs(value) >= size);
    return scale ? `${rounded(value / scale[0])} ${scale[1]} (${exact})` : exact;
  }
  function amount(value, unit) {
    if (unit === "bytes") {
      const scale = BINARY.find(([size]) => Math.abs(value) >= size);
      const exact = `${number.format(value)} ${value === 1 ? "byte" : "bytes"}`;
      return scale ? `${rounded(value / scale[0])} ${scale[1]} (${exact})` : exact;
    }
    return count(value);
  }
  function describe(details) {
    const body = $("panel-body");
    body.replaceChildren();
    const facts = element("dl");
    const add = (term, value) => {
      if (value === undefined || value === "") return;
      facts.append(element("dt", term), element("dd", value));
    };
    add("what it is", details.kind_name);
    add("module type", details.type ? details.type + (details.sizes ? " " + details.sizes : "") : "");
    add("module path", details.path);
    add("PyTorch operator", details.op);
    if (details.ops && details.ops.length) add("operators inside", details.ops.join(", "));
    add("output tensor", [details.shape, details.dtype].filter(Boolean).join(" "));
    if (details.inputs) add(details.inputs.length === 1 ? "input tensor" : "input tensors", details.inputs.join(" · "));
    if (details.repeat > 1) add("repeated", `${details.repeat} identical copies, drawn once`);
    const params = details.params || 0;
    const each = details.repeat > 1 && params ? ` in all · ${count(Math.round(params / details.repeat))} each` : "";
    add("parameters", (params ? count(params) : "none") + each);
    body.append(facts);
    if (details.tensors && details.tensors.length) {
      const each = details.repeat > 1 ? ` (one of ${details.repeat})` : "";
      body.append(element("h3", `Parameter tensors${each}`));
      const table = element("table", undefined, "tensors");
      const head = element("tr");
      head.append(element("th", "name"), element("th", "shape"), element("th", "count", "num"));
      table.append(head);
      for (const [name, dims, size] of details.tensors) {
        const row = element("tr");
        const cell = element("td");
        cell.append(element("code", name));
        row.append(cell, element("td", shape(dims)), element("td", number.format(size), "num"));
        table.append(row);
      }
      body.append(table);
    }
    if (details.shared && details.shared.length) {
      body.append(element("h3", "Shared (tied) parameters, counted elsewhere"));
      body.append(element("p", details.shared.join(", ")));
    }
    if (details.cost && details.cost.length) {
      const copies = details.repeat > 1 ? `, all ${details.repeat} copies` : "";
      body.append(element("h3", (shown.sizes ? `Cost at ${shown.sizes}` : "Cost") + copies));
      const costs = element("dl", undefined, "cost");
      for (const [words, value, unit] of details.cost) costs.append(element("dt", words), element("dd", amount(value, unit)));
      body.append(costs);
    }
  }
  function select(id, move) {
    for (const selected of canvas.querySelectorAll("g.node.selected")) selected.classList.remove("selected");
    const details = id && shown ? shown.nodes[id] : null;
    state.node = details ? id : "";
    if (!details) {
      panel.hidden = true;
      return;
    }
    const target = elementOf(id);
    if (target) target.classList.add("selected");
    $("panel-title").textContent = details.title;
    describe(details);
    panel.hidden = false;
    if (move && target) centre(target);
  }
  canvas.addEventListener("click", (event) => {
    if (moved) return;
    const target = event.target.closest("g.node");
    if (!target) return;
    select(idOf(target), false);
    writeFragment();
  });
  canvas.addEventListener("keydown", (event) => {
    const target = event.target.closest && event.target.closest("g.node");
    if (!target || (event.key !== "Enter" && event.key !== " ")) return;
    event.preventDefault();
    select(idOf(target), false);
    writeFragment();
  });
  $("panel-close").addEventListener("click", () => {
    const previous = state.node && elementOf(state.node);
    select("", false);
    writeFragment();
    if (previous) previous.focus();
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !panel.hidden) {
      select("", false);
      writeFragment();
    }
  });

  // --- theme --------------------------------------------------------------------------
  function setTheme(theme) {
    state.theme = theme;
    document.documentElement.dataset.theme = theme;
    $("theme").textContent = theme;
  }
  $("theme").addEventListener("click", () => {
    const order = ["auto", "light", "dark"];
    setTheme(order[(order.indexOf(state.theme) + 1) % order.length]);
    writeFragment();
  });

  // --- start --------------------------------------------------------------------------
  data.theme = state.theme;
  for (const level of data.levels) {
    const button = element("button", String(level.depth));
    button.type = "button";
    button.dataset.depth = String(level.depth);
    button.title = `depth ${level.depth}: ${level.name}`;
    button.setAttribute("aria-label", `depth ${level.depth}, ${level.name}`);
    button.addEventListener("click", () => {
      if (state.depth !== level.depth) showDepth(level.depth);
    });
    $("depths").append(button);
  }
  async function fromFragment() {
    readFragment();
    setTheme(state.theme);
    search.value = state.query;
    await showDepth(state.depth);
  }
  window.addEventListener("hashchange", () => {
    const params = new URLSearchParams(location.hash.slice(1));
    if (params.get("depth") !== String(state.depth) || (params.get("node") ?? "") !== state.node ||
        (params.get("q") ?? "") !== state.query) fromFragment();
  });
  if (typeof DecompressionStream === "undefined") {
    status.textContent = "This browser cannot unpack the drawings (it lacks DecompressionStream); use a current browser.";
    return;
  }
  fromFragment().then(() => {
    document.documentElement.dataset.ready = "true";
    window.bertgraphReadyAt = performance.now();
  }, (error) => {
    status.textContent = "The drawing could not be shown: " + error;
    throw error;
  });
})();
