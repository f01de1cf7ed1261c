// Deckyard dashboard: live rows and timelines over SSE, action buttons, page-part refreshes.
// Every request rides on the HttpOnly session cookie; state changes add the session's CSRF
// token, which the server put in the page's <meta name="deckyard-csrf">.
"use strict";

const CSRF_HEADER = {
  "X-Deckyard-CSRF": document.querySelector('meta[name="deckyard-csrf"]')?.content ?? "",
};
const ACTIVE = new Set(["pending", "running"]);
const TERMINAL_EVENTS = new Set(["succeeded", "failed", "cancelled"]);
const abort = new AbortController();
window.addEventListener("pagehide", () => abort.abort());

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function signInAgain() {
  const next = location.pathname + location.search;
  location.assign("/ui/sign-in?next=" + encodeURIComponent(next));
}

function showLive(on) {
  for (const el of document.querySelectorAll("[data-live-indicator]")) el.hidden = !on;
}

// Read a Server-Sent Events stream with fetch, so any event name and Last-Event-ID work.
async function readEvents(url, headers, onEvent) {
  const resp = await fetch(url, {
    headers: { Accept: "text/event-stream", ...headers },
    credentials: "same-origin",
    signal: abort.signal,
  });
  if (resp.status === 401) signInAgain();
  if (!resp.ok) throw new Error(`${url}: HTTP ${resp.status}`);
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = { event: "message", id: null, data: [] };
      for (const line of block.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") event.data.push(text);
        else if (field === "event") event.event = text;
        else if (field === "id") event.id = text;
      }
      if (event.data.length) onEvent({ ...event, data: event.data.join("\n") });
    }
  }
}

// Re-fetch this page and swap every [data-live-part] (by id) for its fresh version.
async function refreshParts() {
  const resp = await fetch(location.href, { credentials: "same-origin", signal: abort.signal });
  if (resp.redirected && new URL(resp.url).pathname === "/ui/sign-in") return signInAgain();
  if (!resp.ok) return;
  const fresh = new DOMParser().parseFromString(await resp.text(), "text/html");
  for (const part of document.querySelectorAll("[data-live-part][id]")) {
    const next = fresh.getElementById(part.id);
    if (next) part.replaceWith(document.adoptNode(next));
  }
  checkArtifacts();
}

let refreshTimer = null;
function refreshSoon() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => refreshParts().catch(() => {}), 120);
}

// Cancel / retry buttons: POST to the API with the UI header, then refresh the page parts.
document.addEventListener("click", async (e) => {
  const button = e.target.closest("button[data-action]");
  if (!button) return;
  if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
  const problem = document.querySelector("[data-action-error]");
  button.disabled = true;
  try {
    const resp = await fetch(button.dataset.action, {
      method: "POST",
      headers: CSRF_HEADER,
      credentials: "same-origin",
    });
    if (resp.status === 401) return signInAgain();
    if (!resp.ok) {
      const body = await resp.json().catch(() => ({}));
      throw new Error(body.error ? body.error.message : `HTTP ${resp.status}`);
    }
    if (problem) problem.hidden = true;
    await refreshParts();
    document.dispatchEvent(new CustomEvent("deckyard:acted"));
  } catch (err) {
    if (problem) {
      problem.textContent = err.message;
      problem.hidden = false;
    }
    button.disabled = false;
  }
});

// Job page: follow the job's events; each one refreshes details and timeline.
function followJob(head) {
  const id = head.dataset.jobId;
  let following = false;
  const lastSeen = () =>
    Math.max(0, ...[...document.querySelectorAll("[data-event-id]")].map((li) => +li.dataset.eventId));
  async function follow() {
    if (following) return;
    following = true;
    showLive(true);
    let lastId = lastSeen();
    while (!abort.signal.aborted) {
      try {
        await readEvents(`/v1/jobs/${id}/events`, lastId ? { "Last-Event-ID": String(lastId) } : {}, (ev) => {
          if (ev.id) lastId = Number(ev.id);
          refreshSoon();
          if (TERMINAL_EVENTS.has(ev.event)) showLive(false);
        });
        break; // the server ends the stream when the job ends
      } catch (err) {
        if (abort.signal.aborted) return;
        await sleep(2000);
      }
    }
    following = false;
    showLive(false);
    refreshSoon();
  }
  if (head.dataset.active === "true") follow();
  document.addEventListener("deckyard:acted", follow);
}

// Jobs list: one stream carries changed rows of the active jobs shown and, on the first page,
// rows of new jobs; it ends now and then and is reopened with what the page then shows.
async function followJobs(table) {
  const body = table.tBodies[0];
  const firstPage = table.dataset.firstPage === "true";
  const filters = JSON.parse(table.dataset.filters || "{}");
  while (!abort.signal.aborted) {
    const rows = [...body.rows];
    const watch = rows.filter((r) => ACTIVE.has(r.dataset.status)).map((r) => r.dataset.jobId);
    if (!watch.length && !firstPage) break;
    const params = new URLSearchParams(filters);
    if (watch.length) params.set("watch", watch.join(","));
    if (firstPage) params.set("newest", String(Math.max(0, ...rows.map((r) => +r.dataset.jobId))));
    showLive(true);
    try {
      await readEvents("/ui/jobs/stream?" + params, {}, (ev) => {
        if (ev.event !== "row") return;
        const { id, html } = JSON.parse(ev.data);
        const holder = document.createElement("tbody");
        holder.innerHTML = html;
        const row = holder.firstElementChild;
        const old = document.getElementById("job-" + id);
        if (old) old.replaceWith(row);
        else {
          body.prepend(row);
          row.classList.add("row-new");
          document.querySelector("[data-empty]")?.remove();
        }
      });
    } catch (err) {
      if (abort.signal.aborted) return;
      showLive(false);
      await sleep(2000);
    }
  }
  showLive(false);
}

// Overview: renderers come from GET /v1/renderers, when this server has it.
function cell(tag, text, cls) {
  const el = document.createElement(tag);
  if (text !== undefined) el.textContent = text;
  if (cls) el.className = cls;
  return el;
}

async function loadRenderers(box) {
  let resp;
  try {
    resp = await fetch("/v1/renderers", { credentials: "same-origin", signal: abort.signal });
  } catch (err) {
    return;
  }
  if (resp.status === 401) return signInAgain();
  if (!resp.ok) {
    const why = resp.status === 404 ? "Not available on this server." : `Could not load renderers (HTTP ${resp.status}).`;
    box.replaceChildren(cell("p", why, "muted"));
    return;
  }
  const body = await resp.json();
  const renderers = Array.isArray(body) ? body : body.renderers || [];
  if (!renderers.length) {
    box.replaceChildren(cell("p", "No renderers registered.", "empty"));
    return;
  }
  const table = cell("table", undefined, "table");
  const head = table.createTHead().insertRow();
  for (const [label, cls] of [["Renderer"], ["State"], ["Epoch"], ["Slots in use"]]) head.append(cell("th", label, cls));
  const rows = table.createTBody();
  for (const w of renderers) {
    const tr = rows.insertRow();
    const who = cell("td");
    who.append(cell("div", w.name || w.renderer_id || "renderer", "mono"));
    who.append(cell("div", w.url || "", "muted small"));
    if (w.error) who.append(cell("div", w.error, "small text-bad ellipsis"));
    const state = cell("td");
    state.append(cell("span", w.state || "unknown", "badge badge-renderer-" + (w.state || "unknown")));
    const epoch = cell("td", w.epoch ? String(w.epoch).slice(0, 8) : "—", "mono muted small");
    if (w.epoch) epoch.title = String(w.epoch);
    const slots = Number(w.slots) || 0;
    const used = Number(w.occupancy) || 0;
    const meter = cell("td", undefined, "nowrap");
    const bar = cell("span", undefined, "meter");
    const fill = cell("span", undefined, "meter-fill");
    fill.style.width = slots ? `${Math.min(100, (100 * used) / slots)}%` : "0";
    bar.append(fill);
    meter.append(bar, cell("span", ` ${used} / ${slots}`, "small"));
    tr.append(who, state, epoch, meter);
  }
  box.replaceChildren(table);
}

// Artefact preview: say "not available" when this server cannot serve the bytes.
function checkArtifacts() {
  for (const box of document.querySelectorAll("[data-artifact]")) {
    const img = box.querySelector("img");
    const missing = () => {
      box.querySelector("[data-testid=artifact-link]")?.remove();
      box.querySelector("[data-unavailable]").hidden = false;
    };
    if (img) {
      if (img.complete && img.naturalWidth === 0) missing();
      else img.addEventListener("error", missing, { once: true });
    } else {
      const link = box.querySelector("[data-testid=artifact-link]");
      if (!link) continue;
      fetch(link.href, { credentials: "same-origin", signal: abort.signal })
        .then((r) => {
          r.body?.cancel();
          if (!r.ok) missing();
        })
        .catch(() => {});
    }
  }
}

// Pages whose live parts carry data-refresh="SECONDS" re-fetch them until none does any more.
function autoRefresh() {
  const el = document.querySelector("[data-refresh]");
  if (!el) return;
  const timer = setInterval(() => {
    if (!document.querySelector("[data-refresh]")) return clearInterval(timer);
    if (document.visibilityState === "visible") refreshParts().catch(() => {});
  }, 1000 * Number(el.dataset.refresh));
}

document.addEventListener("DOMContentLoaded", () => {
  const jobHead = document.querySelector("[data-job-page]");
  if (jobHead) followJob(jobHead);
  const jobTable = document.querySelector("[data-job-table]");
  if (jobTable) followJobs(jobTable);
  const renderers = document.querySelector("[data-renderers]");
  if (renderers) {
    loadRenderers(renderers);
    setInterval(() => document.visibilityState === "visible" && loadRenderers(renderers), 5000);
  }
  checkArtifacts();
  autoRefresh();
});
