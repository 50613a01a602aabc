// Sending a message and streaming the answer in (Stop aborts the request), attachments, the
// composer (Enter sends, Shift+Enter is a new line) and copying.
"use strict";

// -- sending and streaming -----------------------------------------------------------------------------

async function send() {
  const text = $("input").value;
  if (chat.busy || (!text.trim() && !chat.pending.length)) return;
  const parts = chat.pending.map((file) => file.part);
  const message = {role: "user", content: parts.length ? [{type: "text", text}, ...parts] : text};
  const conversation = chat.messages;
  conversation.push(message);
  const shown = showUser(message);
  scrollDown();
  $("input").value = "";
  fitInput();
  const attached = chat.pending;
  setPending([]);
  const answered = await generate();
  if (!answered && chat.messages === conversation) {   // nothing came back: the message goes back into the box
    conversation.splice(conversation.indexOf(message), 1);
    shown.remove();
    if (!$("input").value) $("input").value = text;
    setPending(attached);
    fitInput();
  }
}

function setBusy(busy) {
  chat.busy = busy;
  $("send").hidden = busy;
  $("stop").hidden = !busy;
  if (!busy) $("input").focus();
}

// Ask for the next assistant message and stream it into the page; false when nothing came back
async function generate() {
  const conversation = chat.messages;   // Clear during the answer starts a new one: this one keeps the reply
  const view = assistantView();
  const reply = {role: "assistant", content: ""};
  chat.controller = new AbortController();
  setBusy(true);
  scrollDown();
  try {
    const body = requestBody(conversation, true);
    const res = await call("v1/chat/completions",
                           {method: "POST", body: JSON.stringify(body), signal: chat.controller.signal});
    if (!res.ok) throw new PageError(await errorSentence(res), res.status);
    const warning = res.headers.get("X-Llamact-Warning");
    if (warning) view.note(warning);
    const end = await readStream(res, reply, view);
    keep(conversation, reply);
    view.update(reply, false);
    view.finish(end.finish, end.timings);
    if (end.finish === "tool_calls" && reply.tool_calls) askToolResults(view, reply.tool_calls);
    return true;
  } catch (err) {
    return ended(err, conversation, reply, view);
  } finally {
    chat.controller = null;
    setBusy(false);
  }
}

// what a stopped or failed reply leaves: what it said so far stays in the conversation
// (stopped before a word, the answer disappears and the message goes back into the box)
function ended(err, conversation, reply, view) {
  const said = Boolean(reply.content || reply.reasoning_content || reply.tool_calls);
  if (said) keep(conversation, reply);
  view.update(reply, false);
  if (err.name === "AbortError") {
    view.finish("stopped");
    if (!said) view.box.remove();
    return said;
  }
  if (!(err instanceof PageError)) console.error(err);
  view.fail(err instanceof PageError ? err.message : "The page failed: " + err.message);
  return said;
}

function keep(conversation, reply) {
  const message = {role: "assistant", content: reply.content};
  if (reply.reasoning_content) message.reasoning_content = reply.reasoning_content;
  if (reply.tool_calls) message.tool_calls = reply.tool_calls;
  conversation.push(message);
}

function stop() {
  if (chat.controller) chat.controller.abort();
}

// read the server-sent events into `reply`, redrawing at most once a frame; the finish reason and timings
async function readStream(res, reply, view) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const end = {finish: "stop", timings: null};
  let buffer = "", frame = 0;
  const draw = () => {
    frame = 0;
    const follow = following();
    view.update(reply, true);
    if (follow) scrollDown();
  };
  try {
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, {stream: true}).replace(/\r\n/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        applyEvent(event, reply, end);
      }
      if (!frame) frame = requestAnimationFrame(draw);
    }
  } finally {
    cancelAnimationFrame(frame);   // the caller draws the end (finished, stopped or failed)
  }
  return end;
}

function applyEvent(event, reply, end) {
  const data = event.split("\n").filter((line) => line.startsWith("data:"))
    .map((line) => line.slice(5).trimStart()).join("\n");
  if (!data || data === "[DONE]") return;
  const chunk = JSON.parse(data);
  if (chunk.error) throw new PageError(sentenceOf(chunk.error.code, "", chunk.error));
  if (chunk.timings) end.timings = chunk.timings;
  for (const choice of chunk.choices || []) {
    applyDelta(choice.delta || {}, reply);
    if (choice.finish_reason) end.finish = choice.finish_reason;
  }
}

function applyDelta(delta, reply) {
  if (delta.reasoning_content) reply.reasoning_content = (reply.reasoning_content || "") + delta.reasoning_content;
  if (delta.content) reply.content += delta.content;
  for (const part of delta.tool_calls || []) {
    reply.tool_calls = reply.tool_calls || [];
    const call = reply.tool_calls[part.index] ||
      (reply.tool_calls[part.index] = {id: "", type: "function", function: {name: "", arguments: ""}});
    if (part.id) call.id = part.id;
    if (part.function && part.function.name) call.function.name += part.function.name;
    if (part.function && part.function.arguments) call.function.arguments += part.function.arguments;
  }
}

// -- attachments (images and audio, offered for what the model's projector takes) ----------------------

function showAttach(modalities) {
  const accept = [modalities.vision ? "image/*" : "", modalities.audio ? "audio/*" : ""].filter(Boolean);
  $("attach-label").hidden = !accept.length;
  $("attach").accept = accept.join(",");
}

function readDataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

// a file as an OpenAI content part
async function attachment(file) {
  const url = await readDataUrl(file);
  if (file.type.startsWith("audio/")) {
    return {name: file.name, part: {type: "input_audio", input_audio: {data: url.split(",")[1],
                                                                       format: file.type.split("/")[1]}}};
  }
  return {name: file.name, part: {type: "image_url", image_url: {url}}};
}

async function attachFiles() {
  const files = [...$("attach").files];
  $("attach").value = "";
  setPending([...chat.pending, ...await Promise.all(files.map(attachment))]);
}

// the files waiting to go with the next message, each with a button that takes it away again
function setPending(files) {
  chat.pending = files;
  $("attachments").replaceChildren(...files.map((file) => {
    const chip = el("span", null, "chip");
    if (file.part.image_url) chip.append(image(file.part.image_url.url));
    const remove = el("button", "×", "remove");
    remove.type = "button";
    remove.title = "Remove " + file.name;
    remove.addEventListener("click", () => setPending(chat.pending.filter((f) => f !== file)));
    chip.append(el("span", file.name), remove);
    return chip;
  }));
}

// -- the composer --------------------------------------------------------------------------------------

// Enter sends, Shift+Enter is a new line (and Enter that ends an input method's composition is neither)
function onKey(event) {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
}

// the box grows with its text, up to a third of the window
function fitInput() {
  const input = $("input");
  input.style.height = "auto";
  input.style.height = Math.min(input.scrollHeight + 2, window.innerHeight / 3) + "px";
}

// copy to the clipboard (navigator.clipboard exists only on https and localhost: else the old way)
async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch (err) {
    const area = el("textarea");
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  const label = button.textContent;
  button.textContent = "Copied";
  setTimeout(() => { button.textContent = label; }, 1200);
}

function onLogClick(event) {
  const button = event.target.closest(".copy-code");
  if (button) copyText(button.closest(".code-block").querySelector("pre").textContent, button);
}
