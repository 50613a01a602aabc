"""llamact's deliberate output-side deviations from llama-server (docs/design.md, deviations 2-5).

Each lives in its own module and is switched off as a whole by ``upstream_compat=True``:

* 2 -- :mod:`.qwen_xml`: Qwen XML tool calls validated against the tools (typed values; unknown
  function / parameter, duplicates, missing required, wrong type -> content, no call);
* 3 -- :mod:`.double_braces`: Hermes / Qwen 2.5 ``{{...}}`` tool calls extracted;
* 4 -- :mod:`.reasoning`: reasoning trimmed per thought, escaped ``\\n`` / ``\\r`` decoded (not for
  the Qwen3-Coder XML family), a start tag repeated at the start of a forced-open thought dropped;
* 5 -- :mod:`.holdback` + :mod:`.stream`: streamed content and thinking equal the final message
  (whitespace and possible markers held back; tool calls sent whole after validation, withheld
  when generation was cut short).

:mod:`.layouts` tells which tool-call layout a template's output uses and where its calls start.
:class:`DefaultStream` puts them together; ``llamact.chat.streaming.ChatStreamParser`` is the
public entry point.
"""

from __future__ import annotations

from .stream import DefaultStream

__all__ = ["DefaultStream"]
