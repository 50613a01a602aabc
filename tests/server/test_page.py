"""The page at ``/`` in a real headless browser (Debian's chromium and its driver, through selenium):
a streamed answer, the prompt panel, and tool calls shown as JSON."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from server_live import API_KEY, LiveServer

from llamact.parity.server_cases import ONE_TOOL, WEATHER_CALLS

pytestmark = [pytest.mark.model, pytest.mark.slow]


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


def ask(browser: Any, live: LiveServer, text: str, *, key: str = "", tools: Any = None, history: Any = None,
        max_tokens: int = 16, attach: Path | None = None) -> Any:
    """Send ``text`` from the page, greedy (the server's default temperature samples at random), and
    return the answer's element once its stream ended."""
    browser.get(live.base_url + "/")
    browser.find_element(By.ID, "temperature").send_keys("0")
    if history is not None:
        browser.find_element(By.ID, "history").send_keys(json.dumps(history))
    if key:
        browser.find_element(By.ID, "api-key").send_keys(key)
    if tools is not None:
        browser.find_element(By.ID, "tools").send_keys(json.dumps(tools))
    limit = browser.find_element(By.ID, "max-tokens")
    limit.clear()
    limit.send_keys(str(max_tokens))
    if attach is not None:   # the picker appears once /props said what the projector takes
        WebDriverWait(browser, 60).until(lambda b: b.find_element(By.ID, "attach").is_displayed())
        browser.find_element(By.ID, "attach").send_keys(str(attach))
    browser.find_element(By.ID, "input").send_keys(text)
    browser.find_element(By.ID, "send").click()
    # the page marks the answer done when its stream ended
    return WebDriverWait(browser, 300).until(
        lambda b: b.find_element(By.CSS_SELECTOR, ".assistant[data-done='true']"))


def test_page_streams_an_answer_and_shows_the_prompt(browser: Any, server: LiveServer) -> None:
    answer = ask(browser, server, "Say hello.", key=API_KEY)
    assert answer.find_element(By.CLASS_NAME, "content").text
    assert answer.get_attribute("data-finish") in ("stop", "length")
    prompt = browser.find_element(By.ID, "prompt").text
    assert "Say hello." in prompt and "<|im_start|>assistant" in prompt
    assert browser.find_element(By.ID, "family").text
    assert "chat_template_caps" not in browser.find_element(By.ID, "props").text   # shown as "caps"
    assert '"slots": 1' in browser.find_element(By.ID, "props").text


def test_page_shows_tool_calls_as_json_and_the_grammar(browser: Any, fresh_hermes_server: LiveServer) -> None:
    *history, question = WEATHER_CALLS
    answer = ask(browser, fresh_hermes_server, question["content"], tools=ONE_TOOL, history=history, max_tokens=60)
    calls = json.loads(answer.find_element(By.CLASS_NAME, "tool-calls").text)
    assert calls[0]["function"]["name"] == "get_weather"
    assert json.loads(calls[0]["function"]["arguments"]) == {"location": "Paris"}
    assert answer.get_attribute("data-finish") == "tool_calls"
    assert "root" in browser.find_element(By.ID, "grammar").text


def test_page_attaches_an_image(browser: Any, smollm2_path: Path, repo_root: Path, tmp_path: Path) -> None:
    """With --mmproj the page offers a file picker: the image goes in the message as an image_url part,
    shows in the conversation, and the prompt panel shows where the template put it."""
    from llamact.parity.projectors import write_projector

    mmproj = write_projector(tmp_path / "mmproj.gguf", 576, "mlp")
    photo = repo_root / "vendor" / "llama.cpp" / "tools" / "mtmd" / "test-1.jpeg"
    with LiveServer("--model", str(smollm2_path), "--threads", "1", "--mmproj", str(mmproj)) as live:
        answer = ask(browser, live, "What is in this picture?", attach=photo, max_tokens=8)
        assert answer.get_attribute("data-finish") in ("stop", "length")
        shown = browser.find_elements(By.CSS_SELECTOR, ".user img")
        assert len(shown) == 1 and shown[0].get_attribute("src").startswith("data:image/jpeg;base64,")
        assert "What is in this picture?<__media__>" in browser.find_element(By.ID, "prompt").text
        assert '"vision": true' in browser.find_element(By.ID, "props").text


def test_page_asks_for_the_key_on_a_401(browser: Any, server: LiveServer) -> None:
    """Without the key the page says it needs one, instead of showing the 401's JSON (issue 27)."""
    browser.get(server.base_url + "/")
    note = WebDriverWait(browser, 60).until(lambda b: b.find_element(By.ID, "key-needed").is_displayed()
                                            and b.find_element(By.ID, "key-needed"))
    assert "needs an API key" in note.text
    assert "Invalid API Key" not in browser.find_element(By.TAG_NAME, "body").text
    browser.find_element(By.ID, "input").send_keys("Hi")
    browser.find_element(By.ID, "send").click()
    answer = WebDriverWait(browser, 60).until(
        lambda b: b.find_element(By.CSS_SELECTOR, ".assistant[data-done='true']"))
    assert "API key" in answer.text and "Invalid API Key" not in answer.text
    # with the key typed, the model panel fills in
    browser.find_element(By.ID, "api-key").send_keys(API_KEY)
    browser.find_element(By.ID, "max-tokens").click()   # the key field's change event
    WebDriverWait(browser, 60).until(lambda b: '"slots": 1' in b.find_element(By.ID, "props").text)
    assert not browser.find_element(By.ID, "key-needed").is_displayed()


def test_page_picks_a_model_of_a_router(browser: Any, smollm2_path: Any, gemma3_path: Any, tmp_path: Any) -> None:
    from selenium.webdriver.support.ui import Select

    models = tmp_path / "models"
    models.mkdir()
    (models / "smollm2.gguf").symlink_to(smollm2_path)
    (models / "gemma3.gguf").symlink_to(gemma3_path)
    with LiveServer("--models-dir", str(models), "--models-max", "1", "--threads", "1", "--ctx-size", "512") as live:
        browser.get(live.base_url + "/")
        select = WebDriverWait(browser, 60).until(
            lambda b: len(b.find_elements(By.CSS_SELECTOR, "#model option")) == 2 and b.find_element(By.ID, "model"))
        Select(select).select_by_value("gemma3")
        limit = browser.find_element(By.ID, "max-tokens")
        limit.clear()
        limit.send_keys("4")
        browser.find_element(By.ID, "input").send_keys("Hi")
        browser.find_element(By.ID, "send").click()
        answer = WebDriverWait(browser, 120).until(
            lambda b: b.find_element(By.CSS_SELECTOR, ".assistant[data-done='true']"))
        assert "error" not in (answer.get_attribute("class") or "")
        assert '"model": "gemma3"' in browser.find_element(By.ID, "props").text
        status, raw = live.request("GET", "/v1/models")
        assert {m["id"]: m["status"]["value"] for m in json.loads(raw)["data"]}["gemma3"] == "loaded"
