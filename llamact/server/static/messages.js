// The conversation (OpenAI chat messages) and how each message shows: the user's text and images,
// the answer's folded reasoning, Markdown (markdown.js: text nodes only) and tool-call cards, tool results.
"use strict";

// -- the conversation ----------------------------------------------------------------------------------

const chat = {messages: [], busy: false, controller: null, pending: []};

// the conversation as sent: the system prompt first, unless the conversation has its own
function requestMessages(messages) {
  const system = $("system-prompt").value.trim();
  if (!system || (messages[0] && messages[0].role === "system")) return messages;
  return [{role: "system", content: system}, ...messages];
}

function parseTools() {
  const text = $("tools").value.trim();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new PageError("The tools setting is not valid JSON (" + err.message + "): fix it in the settings.");
  }
}

function requestBody(messages, stream) {
  const body = {messages: requestMessages(messages), stream};
  if ($("model").value) body.model = $("model").value;
  const maxTokens = parseInt($("max-tokens").value, 10);
  if (maxTokens > 0) body.max_tokens = maxTokens;
  const temperature = parseFloat($("temperature").value);
  if (!Number.isNaN(temperature)) body.temperature = temperature;
  const tools = parseTools();
  if (tools) {
    body.tools = tools;
    body.tool_choice = $("tool-choice").value;
  }
  return body;
}

// -- messages on the page ------------------------------------------------------------------------------

function addMessage(role) {
  $("empty").hidden = true;
  const box = el("div", null, "msg " + role);
  $("log").append(box);
  return box;
}

// keep the newest text in view, unless the reader scrolled up
function following() {
  const log = $("log");
  return log.scrollHeight - log.scrollTop - log.clientHeight < 60;
}

function scrollDown() {
  $("log").scrollTop = $("log").scrollHeight;
}

function showUser(message) {
  const box = addMessage("user");
  const parts = typeof message.content === "string" ? [{type: "text", text: message.content}] : message.content || [];
  for (const part of parts) {
    if (part.type === "text") box.append(el("div", part.text, "text"));
    else if (part.type === "image_url") box.append(image(part.image_url.url));
    else if (part.type === "input_audio") box.append(el("div", "[audio]", "hint"));
  }
  return box;
}

function image(url) {
  const img = document.createElement("img");
  img.src = url;   // a data: URL of the user's own file
  img.alt = "attached image";
  return img;
}

function showSystem(message) {
  const box = addMessage("system");
  box.append(el("div", "System prompt", "label"), el("div", contentText(message.content), "text"));
}

function contentText(content) {
  if (typeof content === "string") return content;
  return (content || []).filter((p) => p.type === "text").map((p) => p.text).join("\n");
}

// An assistant message's view: reasoning folded, content as Markdown, tool calls as cards, a footer
// with the finish reason, the speed and a copy button. update() redraws it from the message so far.
function assistantView() {
  const box = addMessage("assistant");
  const reasoning = el("details", null, "reasoning");
  reasoning.hidden = true;
  const summary = el("summary", "Reasoning");
  const thought = el("div", null, "reasoning-text");
  reasoning.append(summary, thought);
  const content = el("div", null, "content");
  const calls = el("div", null, "tool-calls");
  const footer = el("div", null, "footer");
  const meta = el("span", null, "meta");
  const copy = el("button", "Copy", "copy");
  copy.type = "button";
  footer.append(meta, copy);
  footer.hidden = true;
  box.append(reasoning, content, calls, footer);
  let message = {role: "assistant", content: ""};
  copy.addEventListener("click", () => copyText(message.content || "", copy));
  return {
    box,
    update(next, streaming) {
      message = next;
      reasoning.hidden = !next.reasoning_content;
      thought.textContent = next.reasoning_content || "";
      summary.textContent = streaming && !next.content && !(next.tool_calls || []).length
        ? "Thinking…" : "Reasoning (" + countWords(next.reasoning_content) + " words)";
      Markdown.render(next.content || "", content);
      showToolCalls(calls, next.tool_calls || []);
    },
    finish(reason, timings) {
      box.dataset.done = "true";
      box.dataset.finish = reason;
      meta.textContent = [FINISH_WORDS[reason], speed(timings)].filter(Boolean).join(" · ");
      footer.hidden = false;
    },
    fail(sentence) {
      box.classList.add("error");
      box.append(el("div", sentence, "error-text"));
      box.dataset.done = "true";
      box.dataset.finish = "error";
    },
    note(text) {
      box.insertBefore(el("div", text, "warning"), content);
    },
  };
}

const FINISH_WORDS = {length: "stopped at the max tokens setting", stopped: "stopped",
                      tool_calls: "waiting for the tools' results"};

function countWords(text) {
  return (text || "").split(/\s+/).filter(Boolean).length;
}

function speed(timings) {
  if (!timings || !timings.predicted_n) return "";
  return timings.predicted_n + " tokens, " + timings.predicted_per_second.toFixed(1) + " tokens/s";
}

function showToolCalls(container, calls) {
  container.replaceChildren(...calls.map(toolCallCard));
}

function toolCallCard(call) {
  const card = el("div", null, "tool-call");
  card.dataset.id = call.id || "";
  const head = el("div", null, "tool-head");
  head.append("Tool call ", el("b", call.function.name, "tool-name"));
  card.append(head, el("pre", prettyJson(call.function.arguments), "tool-args"));
  return card;
}

function prettyJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch (err) {
    return text;   // arguments still streaming in, or not JSON
  }
}

function showToolResult(message) {
  const box = addMessage("tool");
  const name = toolName(message.tool_call_id);
  box.append(el("div", null, "tool-head"));
  box.firstChild.append("Result of ", el("b", name || "a tool", "tool-name"));
  box.append(el("pre", contentText(message.content), "tool-result"));
}

function toolName(id) {
  for (const message of chat.messages) {
    for (const call of message.tool_calls || []) if (call.id === id) return call.function.name;
  }
  return "";
}

// a reply that called tools asks for their results: one field per call, the answer follows once all came
function askToolResults(view, calls) {
  const form = el("form", null, "tool-answers");
  for (const call of calls) {
    const label = el("label", "Result of " + call.function.name);
    const input = el("textarea");
    input.rows = 1;
    input.dataset.id = call.id;
    label.append(input);
    form.append(label);
  }
  const submit = el("button", "Send results", "primary");
  submit.type = "submit";
  form.append(submit);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (chat.busy) return;
    form.remove();
    for (const input of form.querySelectorAll("textarea")) {
      const message = {role: "tool", tool_call_id: input.dataset.id, content: input.value};
      chat.messages.push(message);
      showToolResult(message);
    }
    generate();
  });
  view.box.append(form);
}

function showMessage(message) {
  if (message.role === "user") showUser(message);
  else if (message.role === "system") showSystem(message);
  else if (message.role === "tool") showToolResult(message);
  else {
    const view = assistantView();
    view.update(message, false);
    view.finish("");
  }
}

function showConversation() {
  $("log").replaceChildren($("empty"));
  $("empty").hidden = chat.messages.length > 0;
  chat.messages.forEach(showMessage);
  scrollDown();
}

function clearConversation() {
  if (chat.busy) stop();
  chat.messages = [];
  showConversation();
  $("input").focus();
}
