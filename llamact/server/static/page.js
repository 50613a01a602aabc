// The page at /: a chat with the served model (streamed, reasoning folded, tool calls and results as
// cards, images, Markdown) and the template debugger. Its scripts, in the order index.html loads them:
// markdown.js (model text as text nodes, never HTML), server.js (settings, calls, errors, models),
// messages.js (the conversation on the page), chat.js (sending and streaming), template.js (the
// Template tab), and this one: the controls wired to them, then the start.
"use strict";

function wire() {
  $("composer").addEventListener("submit", (event) => { event.preventDefault(); send(); });
  $("input").addEventListener("keydown", onKey);
  $("input").addEventListener("input", fitInput);
  $("stop").addEventListener("click", stop);
  $("clear").addEventListener("click", clearConversation);
  $("attach").addEventListener("change", () => {
    attachFiles().catch((err) => showNotice("The file cannot be read: " + err.message));
  });
  $("log").addEventListener("click", onLogClick);
  $("tab-chat").addEventListener("click", () => showTab("chat"));
  $("tab-template").addEventListener("click", () => showTab("template"));
  $("template-render").addEventListener("click", renderTemplate);
  $("template-load").addEventListener("click", continueInChat);
  $("settings-toggle").addEventListener("click", () => toggleSettings());
  $("settings-reset").addEventListener("click", resetSettings);
  for (const id of Object.values(FIELDS)) $(id).addEventListener("change", saveSettings);
  $("model").addEventListener("change", () => {
    saveSettings();
    $("model").title = $("model").value;
    loadProps().then(() => showNotice("")).catch((err) => showNotice(err.message));
  });
  $("api-key").addEventListener("change", () => {
    sessionStorage.setItem(KEY_KEY, $("api-key").value.trim());
    refreshModel();
  });
}

wire();
showSettings(storedSettings());
refreshModel();
$("input").focus();
