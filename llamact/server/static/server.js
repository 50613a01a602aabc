// The page's ground floor: small DOM helpers, the settings kept in the browser, calls to the server
// (every path relative, so the page works under --api-prefix), error answers as sentences, the models.
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  if (className) node.className = className;
  return node;
}

// A failure the page can say in its own words (a setting that is not JSON, a server that cannot be
// reached, an error answer made a sentence), with the answer's HTTP status where there was one
class PageError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

// -- settings kept in the browser ----------------------------------------------------------------------

const SETTINGS_KEY = "llamact.page.settings";   // localStorage: survives a reload and a restart
const KEY_KEY = "llamact.page.key";             // sessionStorage: the API key stays with this tab
const FIELDS = {systemPrompt: "system-prompt", temperature: "temperature", maxTokens: "max-tokens",
                tools: "tools", toolChoice: "tool-choice"};
const DEFAULTS = {systemPrompt: "", temperature: "", maxTokens: "1024", tools: "", toolChoice: "auto", model: ""};

function storedSettings() {
  try {
    return {...DEFAULTS, ...JSON.parse(localStorage.getItem(SETTINGS_KEY) || "{}")};
  } catch (err) {
    return {...DEFAULTS};   // a stored value from an older page that does not parse
  }
}

function showSettings(settings) {
  for (const [name, id] of Object.entries(FIELDS)) $(id).value = settings[name];
  $("api-key").value = sessionStorage.getItem(KEY_KEY) || "";
}

function saveSettings() {
  const settings = {model: $("model").value || storedSettings().model};
  for (const [name, id] of Object.entries(FIELDS)) settings[name] = $(id).value;
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(settings));
}

function resetSettings() {
  localStorage.removeItem(SETTINGS_KEY);
  showSettings(DEFAULTS);
}

function toggleSettings(open) {
  const panel = $("settings");
  panel.hidden = open === undefined ? !panel.hidden : !open;
  $("settings-toggle").setAttribute("aria-expanded", String(!panel.hidden));
}

// -- talking to the server -----------------------------------------------------------------------------

function headers() {
  const h = {"Content-Type": "application/json"};
  const key = $("api-key").value.trim();
  if (key) h.Authorization = "Bearer " + key;
  return h;
}

// fetch a path of this server; a network failure becomes a sentence, a 401 asks for the key
async function call(path, options) {
  let res;
  try {
    res = await fetch(path, {...options, headers: headers()});
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new PageError("The server cannot be reached (" + err.message + "): is llamact serve still running?");
  }
  keyNeeded(res.status === 401);
  return res;
}

async function callJson(path, options) {
  const res = await call(path, options);
  if (!res.ok) throw new PageError(await errorSentence(res), res.status);
  return res.json();
}

function keyNeeded(missing) {
  $("key-needed").hidden = !missing;
  if (missing) {
    toggleSettings(true);
    $("api-key").focus();
  }
}

const ERROR_LEADS = {
  authentication_error: "The server needs an API key",
  invalid_request_error: "The server refused the request",
  exceed_context_size_error: "The conversation is too long for the model",
  not_found_error: "Not found on the server",
  unavailable_error: "The model is not available",
  not_supported_error: "The server cannot do this",
  feature_disabled: "This feature is off on the server",
  server_error: "The server failed",
};
const ERROR_ADVICE = {
  exceed_context_size_error: "Clear the conversation or shorten the message.",
};

// a failed answer as one sentence: what kind of failure, the server's own words, what to do
async function errorSentence(res) {
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch (err) { /* not JSON: a proxy's page, say */ }
  return sentenceOf(res.status, res.statusText, body && body.error);
}

function sentenceOf(status, statusText, error) {
  if (status === 401) return "This server needs an API key: type it in the settings, then send again.";
  const type = error && typeof error === "object" ? error.type : undefined;
  const message = typeof error === "string" ? error : (error && error.message) || "";
  const lead = ERROR_LEADS[type] || ("The server answered " + status + (statusText ? " " + statusText : ""));
  const words = message.replace(/\[json\.exception\.[\w.]+\]\s*/g, "").trim();
  let sentence = lead + (words ? ": " + words : "");
  if (!/[.!?]$/.test(sentence)) sentence += ".";
  return ERROR_ADVICE[type] ? sentence + " " + ERROR_ADVICE[type] : sentence;
}

// -- models --------------------------------------------------------------------------------------------

// a model's id as people read it: its alias, else the file name of a path
function modelLabel(model) {
  const id = String(model.id || "");
  const name = (model.aliases && model.aliases[0]) || id.split(/[\\/]/).filter(Boolean).pop() || id;
  const status = model.status && model.status.value;
  return status && status !== "loaded" ? name + " (" + status + ")" : name;
}

async function listModels() {
  const data = await callJson("v1/models");
  const select = $("model"), wanted = select.value || storedSettings().model;
  select.replaceChildren();
  for (const model of data.data || []) {
    const option = el("option", modelLabel(model));
    option.value = model.id;
    option.title = model.id;
    select.append(option);
  }
  if ([...select.options].some((o) => o.value === wanted)) select.value = wanted;
  select.title = select.value;
}

const modelQuery = () => ($("model").value ? "?model=" + encodeURIComponent($("model").value) : "");

let props = {};   // the chosen model's /props

async function loadProps() {
  props = await callJson("props" + modelQuery());
  showAttach(props.modalities || {});
  showModelFacts(props);
  showCaps(props.chat_template_caps || {});
}

// the models and the chosen one's facts; while the model loads (503) the page says so and asks again
async function refreshModel() {
  try {
    await listModels();
    await loadProps();
    showNotice("");
  } catch (err) {
    if (!(err instanceof PageError)) throw err;
    if (!$("key-needed").hidden) return;   // a 401 says so in its own banner
    showNotice(err.message);
    if (err.status === 503) setTimeout(refreshModel, 2000);
  }
}

// a line of the page's own about the server's state (not about an answer); empty: none
function showNotice(text) {
  $("notice").textContent = text;
  $("notice").hidden = !text;
}
