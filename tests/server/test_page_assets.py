"""The page's files as the server serves them (no model, no browser): one response with its stylesheet
and scripts inline, a Content-Security-Policy that allows exactly those, and scripts that never turn
text into HTML (the browser tests in test_page.py show the page at work)."""

from __future__ import annotations

import base64
import hashlib
import re
from importlib import resources

import pytest

from llamact.server.admin.routes import _page

STATIC = resources.files("llamact.server").joinpath("static")
SCRIPTS = ["markdown.js", "server.js", "messages.js", "chat.js", "template.js", "page.js"]   # in index.html's order


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_page_is_one_response_with_its_assets_inline() -> None:
    assert sorted(SCRIPTS + ["index.html", "page.css"]) == sorted(p.name for p in STATIC.iterdir())
    html, _policy = _page()
    assert "<script src" not in html and 'rel="stylesheet"' not in html
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    styles = re.findall(r"<style>(.*?)</style>", html, re.S)
    assert scripts == [STATIC.joinpath(name).read_text(encoding="utf-8") for name in SCRIPTS]
    assert styles == [STATIC.joinpath("page.css").read_text(encoding="utf-8")]


def test_the_policy_allows_the_inline_assets_and_nothing_else() -> None:
    html, policy = _page()
    rules = dict(rule.strip().split(" ", 1) for rule in policy.split(";"))
    assert rules["default-src"] == "'none'"
    assert rules["script-src"].split() == [_hash(s) for s in re.findall(r"<script>(.*?)</script>", html, re.S)]
    assert rules["style-src"].split() == [_hash(s) for s in re.findall(r"<style>(.*?)</style>", html, re.S)]
    assert rules["connect-src"] == "'self'"
    assert "unsafe" not in policy


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_scripts_never_parse_text_as_html(name: str) -> None:
    """Model text reaches the page as text nodes only: no API that parses a string as HTML or code."""
    script = STATIC.joinpath(name).read_text(encoding="utf-8")
    for api in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                "createContextualFragment", "DOMParser", "srcdoc"):
        assert api not in script, f"{name} uses {api}"
