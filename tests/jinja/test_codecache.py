"""The on-disk cache of compiled templates: a hit renders exactly what a fresh compile renders, a
damaged entry is compiled again, and the cache can be switched off."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamact.jinja import codecache
from llamact.jinja.environment import LlamaEnvironment

SOURCE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}{% if not loop.last %}\n{% endif %}"
          "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
CONTEXT = {"messages": [{"role": "user", "content": " hi "}, {"role": "assistant", "content": "hello"}],
           "add_generation_prompt": True}


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LLAMACT_CACHE", str(tmp_path))
    monkeypatch.delenv("LLAMACT_JINJA_CODE_CACHE", raising=False)
    return tmp_path / "jinja-code"


def test_a_cached_template_renders_as_a_fresh_compile(cache_dir: Path) -> None:
    env = LlamaEnvironment()
    fresh = env.from_string(SOURCE).render(CONTEXT)
    first = codecache.compile_cached(env, "render", SOURCE)
    assert len(list(cache_dir.glob("*.code"))) == 1
    second = codecache.compile_cached(env, "render", SOURCE)
    assert first.render(CONTEXT) == second.render(CONTEXT) == fresh


def test_kinds_and_sources_have_their_own_entries(cache_dir: Path) -> None:
    env = LlamaEnvironment()
    codecache.compile_cached(env, "render", SOURCE)
    codecache.compile_cached(env, "caps-probe", SOURCE)
    codecache.compile_cached(env, "render", SOURCE + "!")
    assert len(list(cache_dir.glob("*.code"))) == 3


def test_a_damaged_entry_is_compiled_again(cache_dir: Path) -> None:
    env = LlamaEnvironment()
    codecache.compile_cached(env, "render", SOURCE)
    (entry,) = cache_dir.glob("*.code")
    for damage in (b"", b"not marshal data", b"\x00" * 7):
        entry.write_bytes(damage)
        recompiled = codecache.compile_cached(env, "render", SOURCE)
        assert recompiled.render(CONTEXT) == env.from_string(SOURCE).render(CONTEXT)


def test_the_cache_can_be_switched_off(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLAMACT_JINJA_CODE_CACHE", "0")
    codecache.compile_cached(LlamaEnvironment(), "render", SOURCE)
    assert not cache_dir.exists()


def test_syntax_errors_are_not_cached(cache_dir: Path) -> None:
    import jinja2

    with pytest.raises(jinja2.TemplateSyntaxError):
        codecache.compile_cached(LlamaEnvironment(), "render", "{% if %}")
    assert not cache_dir.exists() or not list(cache_dir.glob("*.code"))
