// bertgraph's interactive diagram viewer: depths, pan and zoom, search, node details.
// Plain JavaScript with no dependencies; every piece of text from the model is set with
// textContent, never parsed as HTML. The URL fragment keeps depth, selection and search.
"use strict";
(() => {
  const data = JSON.parse(document.getElementById("bertgraph-data").textContent);
  const $ = (id) => document.getElementById(id);
  const stage = $("stage"), canvas = $("canvas"), status = $("status");
  const search = $("search"), matches = $("matches"), panel = $("panel");
  const levels = new Map();  // depth -> {svg, nodes, title, subtitle} once unpacked
  const state = { depth: data.depth, node: "", query: "", theme: document.documentElement.dataset.theme };
  const view = { scale: 1, x: 0, y: 0 };
  let shown = null;   // {depth, svg element, nodes}
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
  function fit(wholeDrawing) {
    const box = stage.getBoundingClientRect(), { width, height } = size();
    let scale = Math.min(1, (box.width - 16) / width, (box.height - 16) / height);
    if (!wholeDrawing && scale < 0.45) scale = Math.min(1, (box.width - 16) / width);  // tall: fit the width
    view.scale = Math.max(scale, 0.02);
    view.x = Math.max(8, (box.width - width * view.scale) / 2);
    view.y = Math.max(8, (box.height - height * view.scale) / 2 * (scale === view.scale ? 1 : 0));
    apply();
  }
  function zoom(factor, cx, cy) {
    const box = stage.getBoundingClientRect();
    const x = cx ?? box.width / 2, y = cy ?? box.height / 2;
    const scale = Math.min(8, Math.max(0.02, view.scale * factor));
    view.x = x - (x - view.x) * (scale / view.scale);
    view.y = y - (y - view.y) * (scale / view.scale);
    view.scale = scale;
    apply();
  }
  function centre(element) {
    const box = stage.getBoundingClientRect(), target = element.getBoundingClientRect();
    if (view.scale < 0.6) {
      const scale = 0.9;
      view.x = box.width / 2 - ((target.left + target.width / 2 - box.left - view.x) / view.scale) * scale;
      view.y = box.height / 2 - ((target.top + target.height / 2 - box.top - view.y) / view.scale) * scale;
      view.scale = scale;
    } else {
      view.x += box.left + box.width / 2 - (target.left + target.width / 2);
      view.y += box.top + box.height / 2 - (target.top + target.height / 2);
    }
    apply();
  }
  let drag = null;
  stage.addEventListener("pointerdown", (event) => {
    if (event.button !== 0) return;
    drag = { x: event.clientX, y: event.clientY, vx: view.x, vy: view.y, moved: false, id: event.pointerId };
  });
  stage.addEventListener("pointermove", (event) => {
    if (!drag) return;
    const dx = event.clientX - drag.x, dy = event.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < 4) return;
    if (!drag.moved) {
      drag.moved = true;
      stage.classList.add("dragging");
      stage.setPointerCapture(drag.id);
    }
    view.x = drag.vx + dx;
    view.y = drag.vy + dy;
    apply();
  });
  function endDrag() {
    if (drag && drag.moved) stage.classList.remove("dragging");
    setTimeout(() => { drag = null; }, 0);
  }
  stage.addEventListener("pointerup", endDrag);
  stage.addEventListener("pointercancel", endDrag);
  stage.addEventListener("wheel", (event) => {
    event.preventDefault();
    const box = stage.getBoundingClientRect();
    zoom(Math.exp(-event.deltaY * 0.0015), event.clientX - box.left, event.clientY - box.top);
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
    else if (event.key === "0") fit(true);
    else return;
    event.preventDefault();
  });
  $("zoom-in").addEventListener("click", () => zoom(1.25));
  $("zoom-out").addEventListener("click", () => zoom(0.8));
  $("zoom-fit").addEventListener("click", () => fit(true));

  // --- drawing a depth ----------------------------------------------------------------
  function nodeElements() {
    return shown ? Array.from(canvas.querySelectorAll("g.node")) : [];
  }
  function idOf(element) {
    const title = element.querySelector("title");
    return title ? title.textContent : "";
  }
  function elementOf(id) {
    return nodeElements().find((element) => idOf(element) === id) || null;
  }
  async function showDepth(depth, keepView) {
    const level = await unpack(depth);
    canvas.innerHTML = level.svg;  // Graphviz's output; every label in it is escaped XML
    shown = { depth, svg: canvas.querySelector("svg"), nodes: level.nodes };
    for (const element of nodeElements()) {
      const details = shown.nodes[idOf(element)];
      if (!details) continue;
      element.setAttribute("tabindex", "0");
      element.setAttribute("role", "button");
      element.setAttribute("aria-label", `${details.title}${details.type ? " (" + details.type + ")" : ""}`);
    }
    state.depth = depth;
    for (const button of $("depths").children) {
      button.setAttribute("aria-pressed", String(Number(button.dataset.depth) === depth));
    }
    $("title").textContent = level.title;
    $("title").title = level.subtitle;
    document.title = level.title;
    if (!keepView) fit(false);
    status.textContent = `depth ${depth} · ${Object.keys(level.nodes).length} boxes`;
    if (state.node && !shown.nodes[state.node]) state.node = "";
    select(state.node, false);
    runSearch(false);
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
    const counts = [];
    for (let depth = 0; depth < data.levels.length; depth++) {
      if (depth === state.depth) continue;
      const found = matching((await unpack(depth)).nodes, query).length;
      if (found) counts.push(`${found} at depth ${depth}`);
    }
    return counts;
  }
  function runSearch(move) {
    const query = state.query.trim().toLowerCase();
    for (const element of nodeElements()) element.classList.remove("match");
    canvas.classList.toggle("searching", Boolean(query));
    hits = [];
    hit = -1;
    if (!query) {
      matches.textContent = "";
      return;
    }
    const found = new Set(matching(shown.nodes, query));
    hits = nodeElements().filter((element) => found.has(idOf(element)));
    for (const element of hits) element.classList.add("match");
    matches.textContent = hits.length === 1 ? "1 match" : `${hits.length} matches`;
    if (!hits.length) {
      const asked = state.query;
      otherDepths(query).then((counts) => {
        if (state.query === asked && counts.length) matches.textContent = `none here; ${counts.join(", ")}`;
      });
    }
    if (move && hits.length) next(1);
  }
  function next(step) {
    if (!hits.length) return;
    hit = (hit + step + hits.length) % hits.length;
    centre(hits[hit]);
    matches.textContent = `${hit + 1} of ${hits.length}`;
  }
  search.addEventListener("input", () => {
    state.query = search.value;
    runSearch(true);
    writeFragment();
  });
  search.addEventListener("keydown", (event) => {
    if (event.key !== "Enter") return;
    event.preventDefault();
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
  function costValue(value) {
    if (typeof value === "number") return number.format(value);
    return Object.entries(value).map(([key, v]) => `${key}: ${costValue(v)}`).join(", ");
  }
  function describe(details) {
    const body = $("panel-body");
    body.replaceChildren();
    const facts = element("dl");
    const add = (term, value) => {
      if (value === undefined || value === "") return;
      facts.append(element("dt", term), element("dd", value));
    };
    add("type", details.type ? details.type + (details.sizes ? " " + details.sizes : "") : "");
    add("module", details.path);
    add("operation", details.op);
    if (details.ops && details.ops.length) add("operations", details.ops.join(", "));
    add("output", [details.shape, details.dtype].filter(Boolean).join(" "));
    if (details.inputs) add("inputs", details.inputs.join(" · "));
    if (details.repeat > 1) add("repeats", `${details.repeat} identical, drawn once`);
    const each = details.repeat > 1 ? ` in all · ${number.format(Math.round(details.params / details.repeat))} each` : "";
    add("parameters", number.format(details.params || 0) + (details.params ? each : ""));
    body.append(facts);
    if (details.tensors && details.tensors.length) {
      const each = details.repeat > 1 ? ` (one of ${details.repeat})` : "";
      body.append(element("h3", `Parameter tensors${each}`));
      const table = element("table");
      table.className = "tensors";
      const head = element("tr");
      head.append(element("th", "name"), element("th", "shape"), element("th", "count", "num"));
      table.append(head);
      for (const [name, dims, count] of details.tensors) {
        const row = element("tr");
        const cell = element("td");
        cell.append(element("code", name));
        row.append(cell, element("td", shape(dims)), element("td", number.format(count), "num"));
        table.append(row);
      }
      body.append(table);
    }
    if (details.shared && details.shared.length) {
      body.append(element("h3", "Shared (tied) parameters, counted elsewhere"));
      body.append(element("p", details.shared.join(", ")));
    }
    if (details.cost && Object.keys(details.cost).length) {
      body.append(element("h3", "Cost"));
      const costs = element("dl");
      costs.className = "cost";
      for (const [key, value] of Object.entries(details.cost)) costs.append(element("dt", key), element("dd", costValue(value)));
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
    if (drag && drag.moved) return;
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
      if (state.depth !== level.depth) showDepth(level.depth, false);
    });
    $("depths").append(button);
  }
  async function fromFragment() {
    readFragment();
    setTheme(state.theme);
    search.value = state.query;
    const wanted = state.node;
    await showDepth(state.depth, false);
    if (wanted && shown.nodes[wanted]) select(wanted, true);
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
