// The memory panel's behaviour: sign-in (Telegram initData or a one-time link), filters,
// and changes posted with the session's CSRF token. Plain JavaScript, no inline code:
// the page's Content-Security-Policy allows scripts from this origin only. Memory text
// is never built into HTML here: the server renders it escaped, and messages from the
// server are shown with textContent.
"use strict";

(function () {
  const body = document.body;
  const THEME_KEY = "companion-tg-theme";
  const COLOUR = /^#[0-9a-fA-F]{3,8}$/;
  const THEME_VARS = {
    bg_color: "--bg", text_color: "--text", hint_color: "--hint", link_color: "--link",
    button_color: "--accent", button_text_color: "--accent-text",
    secondary_bg_color: "--card", destructive_text_color: "--danger",
  };

  function applyTheme() {
    let theme = null;
    try { theme = JSON.parse(sessionStorage.getItem(THEME_KEY) || "null"); } catch (e) { theme = null; }
    if (!theme || typeof theme !== "object") return;
    const root = document.documentElement;
    root.classList.add("telegram");
    for (const [key, name] of Object.entries(THEME_VARS)) {
      if (typeof theme[key] === "string" && COLOUR.test(theme[key])) root.style.setProperty(name, theme[key]);
    }
    if (typeof theme.bg_color === "string" && COLOUR.test(theme.bg_color)) {
      const hex = theme.bg_color.replace("#", "");
      const full = hex.length === 3 ? hex.split("").map((c) => c + c).join("") : hex.slice(0, 6);
      const n = parseInt(full, 16);
      const light = ((n >> 16) & 255) * 0.299 + ((n >> 8) & 255) * 0.587 + (n & 255) * 0.114 > 140;
      root.style.setProperty("color-scheme", light ? "light" : "dark");
    }
  }

  function telegramSignIn() {
    const status = document.getElementById("tg-status");
    const hash = new URLSearchParams(location.hash.slice(1));
    const tg = window.Telegram && window.Telegram.WebApp;
    const initData = (tg && tg.initData) || hash.get("tgWebAppData") || "";
    const themeText = hash.get("tgWebAppThemeParams");
    if (themeText) sessionStorage.setItem(THEME_KEY, themeText);
    applyTheme();
    history.replaceState(null, "", location.pathname);  // initData leaves the address bar
    if (!initData) { status.textContent = "Open this page from the button under /memory in Telegram."; return; }
    fetch("session/telegram", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ init_data: initData }),
    }).then((r) => r.json().then((data) => ({ ok: r.ok, data })))
      .then(({ ok, data }) => {
        if (ok) location.replace("./");
        else status.textContent = data.message || "I couldn't sign you in.";
      })
      .catch(() => { status.textContent = "I couldn't reach the companion. Try again."; });
  }

  // ---- the panel ----
  let toastTimer = null;
  let undoEvents = [];

  function toast(message, events, seconds) {
    const box = document.getElementById("toast");
    const text = document.getElementById("toast-text");
    const undo = document.getElementById("toast-undo");
    clearInterval(toastTimer);
    undoEvents = events || [];
    let left = seconds || 8;
    const render = () => {
      text.textContent = message + (undoEvents.length && seconds ? " (" + left + "s)" : "");
    };
    render();
    undo.hidden = undoEvents.length === 0;
    box.hidden = false;
    toastTimer = setInterval(() => {
      left -= 1;
      if (left <= 0) { clearInterval(toastTimer); box.hidden = true; undoEvents = []; return; }
      render();
    }, 1000);
  }

  function post(action, payload) {
    return fetch("api/" + action, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": body.dataset.csrf },
      body: JSON.stringify(payload || {}),
    }).then((r) => r.json().catch(() => ({ ok: false, message: "Something went wrong." })));
  }

  function focusAfter(cardId, action) {
    // Keyboard and screen reader users keep their place: the same button on the same
    // card when it is still there, else the list's summary.
    const card = cardId && document.querySelector('.card[data-id="' + cardId + '"]');
    const target = (card && (card.querySelector('[data-act="' + action + '"]') ||
      card.querySelector(".actions [data-act]"))) || document.getElementById("summary");
    if (target) target.focus();
  }

  function refresh() {
    const active = document.activeElement;
    const card = active && active.closest ? active.closest(".card") : null;
    const cardId = card ? card.dataset.id : "";
    const action = active && active.dataset ? active.dataset.act : "";
    return fetch("content", { credentials: "same-origin" }).then((r) => {
      if (!r.ok) { location.reload(); return; }
      return r.text().then((html) => {
        document.getElementById("content").innerHTML = html;  // rendered and escaped by the server
        filter();
        updateBulk();
        if (cardId || document.activeElement === document.body) focusAfter(cardId, action);
      });
    });
  }

  function act(action, payload, seconds) {
    return post(action, payload).then((data) => {
      toast(data.message || "Done.", data.undo || [], seconds);
      return refresh();
    });
  }

  function value(id) { const el = document.getElementById(id); return el ? el.value : ""; }
  function checked(id) { const el = document.getElementById(id); return el ? el.checked : false; }

  function filter() {
    const q = value("q").trim().toLowerCase();
    const tier = value("f-tier"), category = value("f-category"), source = value("f-source");
    const pinned = checked("f-pinned"), unsure = checked("f-unsure"), faded = checked("f-faded");
    document.querySelectorAll(".card").forEach((card) => {
      const d = card.dataset;
      const text = card.querySelector(".text").textContent.toLowerCase();
      const show = (!q || text.includes(q)) && (!tier || d.tier === tier) &&
        (!category || d.category === category) && (!source || d.source === source) &&
        (!pinned || d.pinned === "1") && (!unsure || d.unsure === "1") && (!faded || d.faded === "1");
      card.hidden = !show;
    });
    document.querySelectorAll(".group").forEach((group) => {
      group.hidden = !group.querySelector(".card:not([hidden])");
    });
  }

  function picked() {
    return Array.from(document.querySelectorAll(".pick:checked")).map((el) => Number(el.value));
  }

  function updateBulk() {
    const count = picked().length;
    document.getElementById("bulk-count").textContent = String(count);
    document.getElementById("bulk-forget").disabled = count === 0;
  }

  function onClick(event) {
    const button = event.target.closest("button[data-act]");
    if (!button) return;
    const card = button.closest(".card");
    const id = card ? Number(card.dataset.id) : 0;
    const action = button.dataset.act;
    if (action === "edit") {
      const form = card.querySelector("form.edit");
      form.hidden = false;
      form.querySelector("textarea").focus();
    } else if (action === "cancel") {
      card.querySelector("form.edit").hidden = true;
      card.querySelector("[data-act=edit]").focus();
    } else {
      act(action, { ids: [id] });
    }
  }

  function panel() {
    applyTheme();
    document.addEventListener("click", onClick);
    document.addEventListener("submit", (event) => {
      const form = event.target.closest("form.edit");
      if (!form) return;
      event.preventDefault();
      const card = form.closest(".card");
      act("edit", { ids: [Number(card.dataset.id)], text: form.querySelector("textarea").value });
    });
    document.addEventListener("change", (event) => {
      if (event.target.classList.contains("pick")) updateBulk(); else filter();
    });
    document.getElementById("q").addEventListener("input", filter);
    document.getElementById("bulk-forget").addEventListener("click", () => {
      const ids = picked();
      if (ids.length) act("forget", { ids: ids });
    });
    const confirmBox = document.getElementById("clear-confirm");
    const clearButton = document.getElementById("clear-all");
    confirmBox.addEventListener("input", () => {
      clearButton.disabled = confirmBox.value.trim().toLowerCase() !== "clear everything";
    });
    clearButton.addEventListener("click", () => {
      confirmBox.value = "";
      clearButton.disabled = true;
      act("clear", {}, 10);
    });
    document.getElementById("sign-out").addEventListener("click", () => {
      fetch("sign-out", { method: "POST", credentials: "same-origin" })
        .finally(() => location.replace("./"));
    });
    document.getElementById("toast-undo").addEventListener("click", () => {
      const events = undoEvents;
      clearInterval(toastTimer);
      document.getElementById("toast").hidden = true;
      undoEvents = [];
      if (events.length) act("undo", { events: events });
    });
    updateBulk();
  }

  function start() {
    const mode = body.dataset.mode;
    if (mode === "telegram") telegramSignIn();
    else if (mode === "panel") panel();
    else applyTheme();
    const open = document.getElementById("open-form");
    if (open && open.dataset.auto) open.submit();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
