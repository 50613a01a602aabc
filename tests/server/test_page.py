"""The page at ``/`` in a real headless browser (Debian's chromium and its driver, through selenium),
against live servers of SmolLM2, at a desktop window (1280x800) and a phone's (390x844).

The layout is checked by element geometry (the message box's width, nothing wider than the window,
the send button in view), not by pixels; the screenshots of both sizes are written to the test's
temporary folder, and to ``$PAGE_SHOTS_DIR`` when set (the docs' picture is one of them)."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait
from server_live import API_KEY, LiveServer

from llamact.parity.server_cases import ONE_TOOL, WEATHER_CALLS

pytestmark = [pytest.mark.model, pytest.mark.slow]

DESKTOP, PHONE = (1280, 800), (390, 844)
GREEDY = {"temperature": "0", "maxTokens": "16"}   # the server's default temperature samples at random


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = shutil.which("chromium")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.fail("chromium and chromedriver are needed: apt-get install chromium chromium-driver "
                    "(scripts/test.sh does, as root)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver_path))
    try:
        yield driver
    finally:
        driver.quit()


# -- driving the page ---------------------------------------------------------------------------------


def open_page(browser: Any, live: LiveServer, size: tuple[int, int] = DESKTOP, *, settings: Any = None,
              key: str = "", ready: bool = True) -> None:
    """The page at ``size`` (the viewport, as a phone's browser has it), with nothing stored but the
    given settings (what the page keeps in localStorage) and API key (sessionStorage); ``ready`` waits
    until the model list filled in."""
    width, height = size
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})
    browser.get(live.base_url + "/")
    browser.execute_script("localStorage.clear(); sessionStorage.clear();"
                           "if (arguments[0]) localStorage.setItem('llamact.page.settings', arguments[0]);"
                           "if (arguments[1]) sessionStorage.setItem('llamact.page.key', arguments[1]);",
                           json.dumps(settings) if settings else "", key)
    browser.get(live.base_url + "/")
    if ready:
        WebDriverWait(browser, 120).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#model option"))


def answers(browser: Any) -> list[Any]:
    return browser.find_elements(By.CSS_SELECTOR, "#log .assistant")


def send(browser: Any, text: str, timeout: float = 300) -> Any:
    """Type ``text``, press Enter, and return the answer's element once its stream ended."""
    before = len(answers(browser))
    box = browser.find_element(By.ID, "input")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)
    return done_answer(browser, before, timeout)


def done_answer(browser: Any, before: int, timeout: float = 300) -> Any:
    def finished(b: Any) -> Any:
        found = answers(b)
        return len(found) > before and found[-1].get_attribute("data-done") == "true" and found[-1]

    return WebDriverWait(browser, timeout).until(finished)


def text_of(element: Any) -> str:
    """An element's text, also where it is folded or on a hidden tab (selenium's .text is what shows)."""
    return str(element.get_attribute("textContent"))


def conversation(browser: Any) -> Any:
    return browser.execute_script("return chat.messages")


def show_tab(browser: Any, name: str) -> None:
    browser.find_element(By.ID, "tab-" + name).click()


def load_conversation(browser: Any, messages: Any) -> None:
    """Put ``messages`` in the chat the way a user does: the template tab's editor, "Continue in the chat"."""
    show_tab(browser, "template")
    editor = browser.find_element(By.ID, "template-messages")
    browser.execute_script("arguments[0].value = arguments[1]", editor, json.dumps(messages))
    browser.find_element(By.ID, "template-load").click()
    assert browser.find_element(By.ID, "chat").is_displayed()


def debugger_prompt(browser: Any) -> str:
    """The rendered prompt of the chat's conversation (with the message being typed), as the tab shows it."""
    show_tab(browser, "template")
    prompt = WebDriverWait(browser, 60).until(lambda b: b.find_element(By.ID, "prompt").text)
    return str(prompt)


def model_fact(browser: Any, name: str, expected: Any) -> str:
    """A fact of the Template tab's model panel once it reads as ``expected`` says (redrawn by each /props)."""
    def read(b: Any) -> str:
        return str(b.execute_script(
            "const e = document.querySelector(`#props [data-fact='${arguments[0]}']`); return e ? e.textContent : ''",
            name))

    return str(WebDriverWait(browser, 60).until(lambda b: expected(read(b)) and read(b)))


def overflowing(browser: Any) -> Any:
    """What sticks out of the window sideways: elements past either edge (other than inside a box that
    scrolls code or tables on purpose) and panels that scroll sideways."""
    return browser.execute_script("""
        const width = document.documentElement.clientWidth;
        const outside = [...document.body.querySelectorAll("*")].filter((e) => {
            const r = e.getBoundingClientRect();
            const scrolls = e.parentElement && e.parentElement.closest("pre, .table-wrap");
            return r.width > 0 && e.tagName !== "OPTION" && !scrolls
                && (r.right > width + 0.5 || r.left < -0.5);
        }).map((e) => e.tagName + "#" + e.id + "." + e.className);
        const scrolling = ["bar", "log", "composer", "template", "settings"].map((id) => document.getElementById(id))
            .filter((e) => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1).map((e) => e.id);
        return {outside, scrolling, page: document.documentElement.scrollWidth - width};
    """)


def in_view(browser: Any, element: Any) -> bool:
    return bool(browser.execute_script("""
        const r = arguments[0].getBoundingClientRect();
        return r.width > 0 && r.height > 0 && r.left >= 0 && r.top >= 0
            && r.right <= document.documentElement.clientWidth && r.bottom <= document.documentElement.clientHeight;
    """, element))


def save_shot(browser: Any, name: str, tmp_path: Path) -> None:
    folders = [tmp_path] + ([Path(os.environ["PAGE_SHOTS_DIR"])] if os.environ.get("PAGE_SHOTS_DIR") else [])
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(folder / name))


# -- layout -------------------------------------------------------------------------------------------

# a conversation that pushes at the edges: long words, a long code line, a wide table, a long path
WIDE_TEXT = ("A path with no spaces: /" + "very-long-directory-name/" * 12 + "model.gguf\n\n"
             "```python\nprint('" + "x" * 300 + "')\n```\n\n"
             "| " + " | ".join(f"column {i}" for i in range(14)) + " |\n|" + "---|" * 14 + "\n"
             "| " + " | ".join(str(i) for i in range(14)) + " |\n")


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1280x800", "390x844"])
def test_page_layout_fits_the_window(browser: Any, server: LiveServer, size: tuple[int, int], tmp_path: Path) -> None:
    """The message box takes the width (issue 44: the model drop-down squeezed it to 6 px), the send
    button shows, nothing sticks out sideways: with a streamed answer, on the template tab, with a
    conversation of long lines and the settings open."""
    width, _height = size
    open_page(browser, server, size, settings={"temperature": "0", "maxTokens": "60"}, key=API_KEY)
    answer = send(browser, "Write a Python function that adds two numbers.")
    assert "error" not in (answer.get_attribute("class") or "")
    save_shot(browser, f"page-{width}x{size[1]}.png", tmp_path)

    box, button = browser.find_element(By.ID, "input"), browser.find_element(By.ID, "send")
    assert box.rect["width"] >= (560 if width >= 1000 else 250), box.rect
    assert in_view(browser, box) and in_view(browser, button)
    assert in_view(browser, browser.find_element(By.ID, "model"))
    assert overflowing(browser) == {"outside": [], "scrolling": [], "page": 0}
    debugger_prompt(browser)
    assert overflowing(browser) == {"outside": [], "scrolling": [], "page": 0}
    save_shot(browser, f"page-template-{width}x{size[1]}.png", tmp_path)

    load_conversation(browser, [{"role": "user", "content": "x" * 400}, {"role": "assistant", "content": WIDE_TEXT}])
    assert overflowing(browser) == {"outside": [], "scrolling": [], "page": 0}
    assert in_view(browser, browser.find_element(By.ID, "send"))

    browser.find_element(By.ID, "settings-toggle").click()
    assert in_view(browser, browser.find_element(By.ID, "system-prompt"))
    assert overflowing(browser) == {"outside": [], "scrolling": [], "page": 0}
    browser.find_element(By.ID, "settings-toggle").click()

    debugger_prompt(browser)
    assert overflowing(browser) == {"outside": [], "scrolling": [], "page": 0}


# -- the chat -----------------------------------------------------------------------------------------


def test_enter_sends_and_the_answer_streams_in(browser: Any, server: LiveServer) -> None:
    open_page(browser, server, settings={"temperature": "0", "maxTokens": "48"}, key=API_KEY)
    box = browser.find_element(By.ID, "input")
    box.send_keys("first line", Keys.SHIFT, Keys.ENTER, Keys.SHIFT, "second line")   # Shift+Enter: a new line
    assert box.get_attribute("value") == "first line\nsecond line"
    assert not answers(browser)
    box.send_keys(Keys.ENTER)
    # while it streams: part of the answer shown, Stop offered instead of Send
    partial = WebDriverWait(browser, 120, poll_frequency=0.02).until(
        lambda b: answers(b) and answers(b)[-1].get_attribute("data-done") is None
        and text_of(answers(b)[-1].find_element(By.CLASS_NAME, "content")))
    assert browser.find_element(By.ID, "stop").is_displayed()
    assert not browser.find_element(By.ID, "send").is_displayed()
    answer = done_answer(browser, 0)
    final = text_of(answer.find_element(By.CLASS_NAME, "content"))
    assert len(final) > len(partial)
    assert answer.get_attribute("data-finish") in ("stop", "length")
    assert box.get_attribute("value") == ""
    assert browser.find_element(By.CSS_SELECTOR, "#log .user").text == "first line\nsecond line"
    messages = conversation(browser)
    assert [m["role"] for m in messages] == ["user", "assistant"] and messages[1]["content"]
    assert "tokens/s" in answer.find_element(By.CLASS_NAME, "meta").text
    assert browser.find_element(By.ID, "send").is_displayed()


def test_stop_ends_the_stream(browser: Any, server: LiveServer) -> None:
    """Stop ends the answer in the page and on the server (its slot stops processing); what came so
    far stays in the conversation."""
    open_page(browser, server, settings={"temperature": "0", "maxTokens": "1500"}, key=API_KEY)
    browser.find_element(By.ID, "input").send_keys("Tell me a very long story about a dragon.", Keys.ENTER)
    WebDriverWait(browser, 120).until(
        lambda b: answers(b) and text_of(answers(b)[-1].find_element(By.CLASS_NAME, "content")))
    browser.find_element(By.ID, "stop").click()
    answer = done_answer(browser, 0, timeout=30)
    assert answer.get_attribute("data-finish") == "stopped"
    assert "stopped" in answer.find_element(By.CLASS_NAME, "meta").text
    assert browser.find_element(By.ID, "send").is_displayed() and not browser.find_element(By.ID, "stop").is_displayed()
    said = conversation(browser)[-1]
    assert said["role"] == "assistant" and said["content"]
    deadline = time.monotonic() + 60
    while True:   # the server saw the stream closed and ended the job
        status, raw = server.request("GET", "/slots")
        assert status == 200
        if not any(slot["is_processing"] for slot in json.loads(raw)):
            break
        assert time.monotonic() < deadline, "the slot still processes after Stop"
        time.sleep(0.2)
    shown = text_of(answer.find_element(By.CLASS_NAME, "content"))
    time.sleep(1)   # and nothing more arrives
    assert text_of(answer.find_element(By.CLASS_NAME, "content")) == shown


def test_clear_empties_the_conversation(browser: Any, server: LiveServer) -> None:
    open_page(browser, server, settings=GREEDY, key=API_KEY)
    send(browser, "Hi")
    browser.find_element(By.ID, "clear").click()
    assert not browser.find_elements(By.CSS_SELECTOR, "#log .msg")
    assert conversation(browser) == []
    assert browser.find_element(By.ID, "empty").is_displayed()
    browser.find_element(By.ID, "input").send_keys("Next")
    prompt = debugger_prompt(browser)
    assert "<|im_start|>user\nHi<|im_end|>" not in prompt   # only the new message goes
    assert "<|im_start|>user\nNext" in prompt


def test_copy_puts_the_answer_on_the_clipboard(browser: Any, server: LiveServer) -> None:
    open_page(browser, server, settings=GREEDY, key=API_KEY)
    allowed = ["clipboardReadWrite", "clipboardSanitizedWrite"]
    browser.execute_cdp_cmd("Browser.grantPermissions", {"origin": server.base_url, "permissions": allowed})
    answer = send(browser, "Hi")
    answer.find_element(By.CLASS_NAME, "copy").click()
    WebDriverWait(browser, 10).until(lambda b: answer.find_element(By.CLASS_NAME, "copy").text == "Copied")
    copied = browser.execute_async_script("navigator.clipboard.readText().then(arguments[0])")
    assert copied == conversation(browser)[-1]["content"]


def test_reasoning_is_folded(browser: Any, r1_server: LiveServer) -> None:
    """DeepSeek R1's template opens a thought: the thought streams into a folded block, apart from the answer."""
    open_page(browser, r1_server, settings=GREEDY)
    answer = send(browser, "Hi")
    fold = answer.find_element(By.CSS_SELECTOR, "details.reasoning")
    assert fold.get_attribute("open") is None and fold.is_displayed()
    thought = text_of(fold.find_element(By.CLASS_NAME, "reasoning-text"))
    assert thought.strip() and not fold.find_element(By.CLASS_NAME, "reasoning-text").is_displayed()
    assert fold.find_element(By.TAG_NAME, "summary").text.startswith("Reasoning (")
    assert conversation(browser)[-1]["reasoning_content"] == thought
    fold.find_element(By.TAG_NAME, "summary").click()
    assert fold.find_element(By.CLASS_NAME, "reasoning-text").is_displayed()


def test_tool_calls_and_results_show_as_such(browser: Any, fresh_hermes_server: LiveServer) -> None:
    """Earlier calls and results as cards; a new call streamed into a card with its arguments, then
    its result typed in and the answer going on; the template tab shows the call's grammar."""
    *history, question = WEATHER_CALLS
    open_page(browser, fresh_hermes_server, settings={"temperature": "0", "maxTokens": "60",
                                                       "tools": json.dumps(ONE_TOOL)})
    load_conversation(browser, history)
    results = browser.find_elements(By.CSS_SELECTOR, "#log .msg.tool")
    assert [r.find_element(By.CLASS_NAME, "tool-name").text for r in results] == ["get_weather", "get_weather"]
    assert [r.find_element(By.CLASS_NAME, "tool-result").text for r in results] == ["12 C", "20 C"]
    earlier = answers(browser)
    assert json.loads(earlier[0].find_element(By.CLASS_NAME, "tool-args").text) == {"location": "Berlin"}

    answer = send(browser, question["content"])
    card = answer.find_element(By.CLASS_NAME, "tool-call")
    assert card.find_element(By.CLASS_NAME, "tool-name").text == "get_weather"
    assert json.loads(card.find_element(By.CLASS_NAME, "tool-args").text) == {"location": "Paris"}
    assert answer.get_attribute("data-finish") == "tool_calls"

    result = answer.find_element(By.CSS_SELECTOR, ".tool-answers textarea")
    result.send_keys("25 C")
    before = len(answers(browser))
    answer.find_element(By.CSS_SELECTOR, ".tool-answers button").click()
    done_answer(browser, before)
    assert browser.find_elements(By.CSS_SELECTOR, "#log .msg.tool")[-1].find_element(
        By.CLASS_NAME, "tool-result").text == "25 C"
    sent = conversation(browser)
    call_id = sent[-3]["tool_calls"][0]["id"]
    assert sent[-2] == {"role": "tool", "tool_call_id": call_id, "content": "25 C"}

    debugger_prompt(browser)
    assert "root" in browser.find_element(By.ID, "grammar").text


# -- images -------------------------------------------------------------------------------------------


def test_page_attaches_an_image(browser: Any, smollm2_path: Path, repo_root: Path, tmp_path: Path) -> None:
    """With --mmproj the page offers a file picker: the image waits as a chip, goes in the message as an
    image_url part, shows in the conversation, and the template tab shows where the template put it."""
    from llamact.parity.projectors import write_projector

    mmproj = write_projector(tmp_path / "mmproj.gguf", 576, "mlp")
    photo = repo_root / "vendor" / "llama.cpp" / "tools" / "mtmd" / "test-1.jpeg"
    with LiveServer("--model", str(smollm2_path), "--threads", "1", "--mmproj", str(mmproj)) as live:
        open_page(browser, live, settings={"temperature": "0", "maxTokens": "8"})
        WebDriverWait(browser, 60).until(lambda b: b.find_element(By.ID, "attach-label").is_displayed())
        browser.find_element(By.ID, "attach").send_keys(str(photo))
        WebDriverWait(browser, 10).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#attachments .chip img"))
        answer = send(browser, "What is in this picture?")
        assert answer.get_attribute("data-finish") in ("stop", "length")
        assert not browser.find_elements(By.CSS_SELECTOR, "#attachments .chip")
        shown = browser.find_elements(By.CSS_SELECTOR, ".user img")
        assert len(shown) == 1 and shown[0].get_attribute("src").startswith("data:image/jpeg;base64,")
        assert "What is in this picture?<__media__>" in debugger_prompt(browser)
        assert model_fact(browser, "media", lambda text: "vision" in text) == "text, vision"


# -- Markdown -----------------------------------------------------------------------------------------

HOSTILE = ("Here is code:\n\n```html\n<script>alert('code')</script>\n<b>bold?</b>\n```\n\n"
           "<img src=x onerror=\"document.title='owned'\"> <b>not bold</b> **bold** and `x < y`\n\n"
           "[click](javascript:document.title='owned') [docs](https://example.org/a?b=1)\n\n- one\n- two")


def test_markdown_renders_code_and_keeps_html_as_text(browser: Any, server: LiveServer) -> None:
    """Model text is Markdown made of text nodes: a code block with its language and copy button,
    HTML tags shown as they were written (never elements), links only to web addresses."""
    open_page(browser, server, settings=GREEDY, key=API_KEY)
    load_conversation(browser, [{"role": "user", "content": "<i>user html</i>"},
                                {"role": "assistant", "content": HOSTILE}])
    content = answers(browser)[-1].find_element(By.CLASS_NAME, "content")
    code = content.find_element(By.CSS_SELECTOR, ".code-block pre code")
    assert text_of(code) == "<script>alert('code')</script>\n<b>bold?</b>"
    assert content.find_element(By.CSS_SELECTOR, ".code-block .lang").text == "html"
    assert content.find_elements(By.CSS_SELECTOR, ".code-block .copy-code")
    assert '<img src=x onerror="document.title=\'owned\'"> <b>not bold</b>' in content.text
    assert not content.find_elements(By.CSS_SELECTOR, "img, b, script, i")
    assert [e.text for e in content.find_elements(By.TAG_NAME, "strong")] == ["bold"]
    assert content.find_element(By.CSS_SELECTOR, "p code").text == "x < y"
    links = content.find_elements(By.TAG_NAME, "a")
    assert [a.get_attribute("href") for a in links] == ["https://example.org/a?b=1"]
    assert "[click](javascript:" not in content.text and "click" in content.text
    assert [li.text for li in content.find_elements(By.TAG_NAME, "li")] == ["one", "two"]
    assert browser.find_element(By.CSS_SELECTOR, "#log .user").text == "<i>user html</i>"
    assert browser.title == "llamact"
    # a fence still open (the answer is streaming) is already a code block
    streaming = browser.execute_script("""
        const box = document.createElement("div");
        Markdown.render("Text\\n```js\\nlet a = '<b>';", box);
        return [box.querySelector("pre code").textContent, box.querySelectorAll("b").length];
    """)
    assert streaming == ["let a = '<b>';", 0]


# -- errors and the API key ---------------------------------------------------------------------------


def test_an_error_shows_as_a_sentence(browser: Any, server: LiveServer) -> None:
    """A refusal is the server's words in a sentence (not its JSON), and the message goes back into the box."""
    open_page(browser, server, settings=GREEDY, key=API_KEY)
    too_long = "word " * 6000   # past the server's 4096-token context
    box = browser.find_element(By.ID, "input")
    browser.execute_script("arguments[0].value = arguments[1]", box, too_long)
    box.send_keys(Keys.END, Keys.ENTER)
    answer = done_answer(browser, 0, timeout=120)
    said = answer.find_element(By.CLASS_NAME, "error-text").text
    assert said.startswith("The conversation is too long for the model: ")
    assert "tokens" in said and said.endswith("Clear the conversation or shorten the message.")
    assert "{" not in said and "exceed_context_size_error" not in said
    assert box.get_attribute("value") == too_long and conversation(browser) == []

    open_page(browser, server, settings={"tools": "[{oops"}, key=API_KEY)
    answer = send(browser, "Hi")
    said = answer.find_element(By.CLASS_NAME, "error-text").text
    assert said.startswith("The tools setting is not valid JSON (") and said.endswith("fix it in the settings.")


def test_the_page_waits_for_a_model_that_loads(browser: Any, server: LiveServer) -> None:
    """While the model loads, /props answers llama-server's 503 "Loading model": the page says so as a
    sentence and asks again until the model is there. (The 503s are given to the page's fetch here: a
    live server is tested once healthy.)"""
    open_page(browser, server, key=API_KEY)
    browser.execute_script("""
        const real = window.fetch;
        let refusals = 3;
        window.fetch = (path, options) => String(path).startsWith("props") && refusals-- > 0
            ? Promise.resolve(new Response(JSON.stringify(
                {error: {code: 503, message: "Loading model", type: "unavailable_error"}}), {status: 503}))
            : real(path, options);
        document.getElementById("props").replaceChildren();
        refreshModel();
    """)
    notice = WebDriverWait(browser, 10).until(lambda b: b.find_element(By.ID, "notice").is_displayed()
                                              and b.find_element(By.ID, "notice"))
    assert notice.text == "The model is not available: Loading model."
    WebDriverWait(browser, 30).until(lambda b: not b.find_element(By.ID, "notice").is_displayed())
    assert model_fact(browser, "slots", bool) == "1"


def test_page_asks_for_the_key_on_a_401(browser: Any, server: LiveServer) -> None:
    """Without the key the page says it needs one, instead of showing the 401's JSON (issue 27); with it
    typed, the models fill in, each shown by its file name."""
    open_page(browser, server, settings=GREEDY, ready=False)
    note = WebDriverWait(browser, 60).until(lambda b: b.find_element(By.ID, "key-needed").is_displayed()
                                            and b.find_element(By.ID, "key-needed"))
    assert "needs an API key" in note.text
    assert browser.find_element(By.ID, "settings").is_displayed()
    assert browser.switch_to.active_element == browser.find_element(By.ID, "api-key")
    assert "Invalid API Key" not in browser.find_element(By.TAG_NAME, "body").text
    browser.find_element(By.ID, "input").send_keys("Hi", Keys.ENTER)
    answer = done_answer(browser, 0, timeout=60)
    assert "API key" in answer.text and "Invalid API Key" not in answer.text
    assert browser.find_element(By.ID, "input").get_attribute("value") == "Hi"   # back in the box
    browser.find_element(By.ID, "api-key").send_keys(API_KEY)
    browser.find_element(By.ID, "system-prompt").click()   # the key field's change event
    option = WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#model option"))[0]
    model_id = option.get_attribute("value")
    assert option.text == model_id.replace("\\", "/").rsplit("/", 1)[-1] and "/" not in option.text
    assert not browser.find_element(By.ID, "key-needed").is_displayed()
    browser.find_element(By.ID, "settings-toggle").click()
    answer = send(browser, "")   # the message still in the box
    assert "error" not in (answer.get_attribute("class") or "")


def test_settings_are_kept_in_the_browser(browser: Any, server: LiveServer) -> None:
    open_page(browser, server, key=API_KEY)
    browser.find_element(By.ID, "settings-toggle").click()
    fields = {"system-prompt": "You answer like a pirate.", "temperature": "0", "max-tokens": "12"}
    for field, value in fields.items():
        element = browser.find_element(By.ID, field)
        element.clear()
        element.send_keys(value)
    Select(browser.find_element(By.ID, "tool-choice")).select_by_value("none")
    browser.find_element(By.ID, "settings-toggle").click()   # the last field's change event
    browser.refresh()
    WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#model option"))
    for field, value in fields.items():
        assert browser.find_element(By.ID, field).get_attribute("value") == value
    assert browser.find_element(By.ID, "tool-choice").get_attribute("value") == "none"
    assert browser.find_element(By.ID, "api-key").get_attribute("value") == API_KEY   # this tab's session
    stored = json.loads(browser.execute_script("return localStorage.getItem('llamact.page.settings')"))
    assert API_KEY not in json.dumps(stored)   # the key is not kept beyond the tab
    browser.find_element(By.ID, "input").send_keys("Hello")
    prompt = debugger_prompt(browser)
    assert "<|im_start|>system\nYou answer like a pirate.<|im_end|>" in prompt
    show_tab(browser, "chat")
    send(browser, "")
    assert conversation(browser)[0]["content"] == "Hello"   # the system prompt goes with each request only


# -- the template debugger ----------------------------------------------------------------------------


def test_the_template_tab_shows_the_prompt_family_and_caps(browser: Any, server: LiveServer) -> None:
    open_page(browser, server, key=API_KEY)
    browser.find_element(By.ID, "input").send_keys("Say hello.")
    prompt = debugger_prompt(browser)
    assert "Say hello." in prompt and prompt.endswith("<|im_start|>assistant")
    assert browser.find_element(By.ID, "family").text
    assert browser.find_element(By.ID, "format").text
    assert browser.find_element(By.ID, "generation-prompt").text == "<|im_start|>assistant"
    assert "none" in browser.find_element(By.ID, "grammar").text
    cap = browser.find_element(By.CSS_SELECTOR, "#caps [data-cap='supports_system_role']")
    assert cap.get_attribute("class") == "yes" and cap.text == "✓ system role"
    assert model_fact(browser, "slots", bool) == "1"
    # edited and rendered again
    editor = browser.find_element(By.ID, "template-messages")
    editor.clear()
    editor.send_keys('[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Bonjour"}]')
    browser.find_element(By.ID, "template-render").click()
    WebDriverWait(browser, 60).until(lambda b: "Bonjour" in b.find_element(By.ID, "prompt").text)
    assert "<|im_start|>system\nBe brief.<|im_end|>" in browser.find_element(By.ID, "prompt").text
    editor.send_keys("oops")
    browser.find_element(By.ID, "template-render").click()
    assert browser.find_element(By.ID, "template-error").text.startswith("The messages are not a JSON list")


def test_page_picks_a_model_of_a_router(browser: Any, smollm2_path: Any, gemma3_path: Any, tmp_path: Any) -> None:
    models = tmp_path / "models"
    models.mkdir()
    (models / "smollm2.gguf").symlink_to(smollm2_path)
    (models / "gemma3.gguf").symlink_to(gemma3_path)
    with LiveServer("--models-dir", str(models), "--models-max", "1", "--threads", "1", "--ctx-size", "512") as live:
        open_page(browser, live, settings={"maxTokens": "4"}, ready=False)
        select = WebDriverWait(browser, 60).until(
            lambda b: len(b.find_elements(By.CSS_SELECTOR, "#model option")) == 2 and b.find_element(By.ID, "model"))
        Select(select).select_by_value("gemma3")
        answer = send(browser, "Hi", timeout=120)
        assert "error" not in (answer.get_attribute("class") or "")
        show_tab(browser, "template")
        assert model_fact(browser, "name", lambda text: text == "gemma3")
        status, raw = live.request("GET", "/v1/models")
        assert {m["id"]: m["status"]["value"] for m in json.loads(raw)["data"]}["gemma3"] == "loaded"
        browser.refresh()   # the choice is kept
        WebDriverWait(browser, 60).until(lambda b: b.find_element(By.ID, "model").get_attribute("value") == "gemma3")


class PrefixedServer(LiveServer):
    """A server under ``--api-prefix /llama`` (its health asked there)."""

    def request(self, method: str, path: str, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        return super().request(method, "/llama" + path, *args, **kwargs)


def test_the_page_works_under_an_api_prefix(browser: Any, smollm2_path: Path) -> None:
    """Its calls are relative to the page: under --api-prefix /llama they go to /llama/v1/..."""
    with PrefixedServer("--model", str(smollm2_path), "--threads", "1", "--api-prefix", "/llama") as live:
        width, height = DESKTOP
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        browser.get(live.base_url + "/llama")   # redirected to /llama/
        browser.execute_script("localStorage.setItem('llamact.page.settings', arguments[0])",
                               json.dumps({"temperature": "0", "maxTokens": "4"}))
        browser.refresh()
        WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#model option"))
        answer = send(browser, "Hi", timeout=120)
        assert "error" not in (answer.get_attribute("class") or "") and conversation(browser)[-1]["content"]
        assert browser.current_url == live.base_url + "/llama/"
