// The Template tab: what the model's chat template makes of a conversation (/template-details) and
// what the model and its template support (/props).
"use strict";

// -- tabs and the template debugger --------------------------------------------------------------------

function showTab(name) {
  for (const tab of ["chat", "template"]) {
    $(tab).hidden = tab !== name;
    $("tab-" + tab).setAttribute("aria-selected", String(tab === name));
  }
  if (name === "template") openDebugger();
}

// the debugger starts from the chat's conversation (with the message being typed) and renders it
function openDebugger() {
  const messages = requestMessages([...chat.messages]);
  if ($("input").value.trim()) messages.push({role: "user", content: $("input").value});
  if (!messages.length) messages.push({role: "user", content: "Hello!"});
  $("template-messages").value = JSON.stringify(messages, null, 2);
  renderTemplate();
}

function debuggerMessages() {
  try {
    const messages = JSON.parse($("template-messages").value);
    if (!Array.isArray(messages)) throw new Error("not a list of messages");
    return messages;
  } catch (err) {
    throw new PageError("The messages are not a JSON list (" + err.message + ").");
  }
}

async function renderTemplate() {
  $("template-error").textContent = "";
  try {
    const messages = debuggerMessages();
    const body = requestBody(messages, false);
    body.messages = messages;   // as written: the system prompt setting is in them already
    const details = await callJson("template-details", {method: "POST", body: JSON.stringify(body)});
    showDetails(details);
    await loadProps();
  } catch (err) {
    if (!(err instanceof PageError)) throw err;
    $("template-error").textContent = err.message;
  }
}

function showDetails(details) {
  $("family").textContent = details.family;
  $("format").textContent = details.format;
  $("generation-prompt").textContent = details.generation_prompt || "(none)";
  $("stops").textContent = (details.additional_stops || []).map((s) => JSON.stringify(s)).join(", ") || "(none)";
  $("prompt").textContent = details.prompt;
  $("grammar").textContent = details.grammar || "(none: the answer is free text)";
  const triggers = (details.grammar_triggers || []).map((t) => JSON.stringify(t.value || t)).join(", ");
  $("grammar-mode").textContent = !details.grammar ? "" : details.grammar_lazy
    ? "(lazy: applies once the model writes " + (triggers || "a trigger") + ")" : "(applies from the first token)";
}

function showCaps(caps) {
  $("caps").replaceChildren(...Object.entries(caps).map(([name, yes]) => {
    const item = el("li", (yes ? "✓ " : "✗ ") + name.replace(/^supports_/, "").replace(/_/g, " "), yes ? "yes" : "no");
    item.dataset.cap = name;
    return item;
  }));
}

function showModelFacts(p) {
  const settings = p.default_generation_settings || {};
  const modalities = Object.entries(p.modalities || {}).filter(([, on]) => on).map(([name]) => name);
  const facts = [
    ["name", "Name", modelLabel({id: p.model_alias || p.model_path || ""})],
    ["file", "File", p.model_path],
    ["context", "Context", settings.n_ctx && settings.n_ctx + " tokens"],
    ["slots", "Slots", p.total_slots],
    ["media", "Takes", ["text", ...modalities].join(", ")],
    ["build", "llama.cpp", p.build_info],
  ];
  $("props").replaceChildren(...facts.filter(([, , value]) => value !== undefined && value !== "").flatMap(
    ([key, label, value]) => {
      const dd = el("dd", String(value));
      dd.dataset.fact = key;
      return [el("dt", label), dd];
    }));
}

function continueInChat() {
  try {
    chat.messages = debuggerMessages();
  } catch (err) {
    $("template-error").textContent = err.message;
    return;
  }
  showConversation();
  showTab("chat");
}
