// A small Markdown renderer for model text: it builds DOM nodes, so every character of the text ends up
// in a text node and nothing the model writes is ever parsed as HTML ("<b>" shows as "<b>").
// Blocks: fenced code (also while its fence is still open, as text streams in), headings, quotes, lists,
// tables, rules, paragraphs. Inline: code, bold, italic, strikethrough, links (http, https and mailto only).
"use strict";

const Markdown = (() => {
  function el(tag, children, attrs) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
    if (typeof children === "string") node.textContent = children;
    else if (children) node.append(...children);
    return node;
  }

  // -- blocks --------------------------------------------------------------------------------------

  const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)/;
  const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
  const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
  const QUOTE = /^ {0,3}> ?/;
  const ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])\s+/;
  const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

  // the document's blocks as nodes
  function blocks(text) {
    const lines = text.replace(/\r\n?/g, "\n").split("\n");
    const out = [];
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      if (!line.trim()) { i++; continue; }
      const reader = [fence, heading, rule, quote, list, table].find((read) => read.test(lines, i));
      const [node, next] = (reader || paragraph).read(lines, i);
      out.push(node);
      i = next;
    }
    return out;
  }

  const fence = {
    test: (lines, i) => FENCE.test(lines[i]),
    read(lines, i) {
      const [, marker, lang] = lines[i].match(FENCE);
      const closing = new RegExp("^ {0,3}" + marker[0] + "{" + marker.length + ",}\\s*$");
      const body = [];
      let j = i + 1;
      while (j < lines.length && !closing.test(lines[j])) body.push(lines[j++]);
      return [codeBlock(body.join("\n"), lang), j + 1];   // an open fence runs to the end (still streaming)
    },
  };

  // a code block with its language and a copy button (the page gives the button its action)
  function codeBlock(code, lang) {
    const head = el("div", [el("span", lang || "code", {class: "lang"}),
                            el("button", "Copy", {type: "button", class: "copy-code"})], {class: "code-head"});
    const codeNode = el("code", code);
    if (lang) codeNode.className = "language-" + lang;
    return el("div", [head, el("pre", [codeNode])], {class: "code-block"});
  }

  const heading = {
    test: (lines, i) => HEADING.test(lines[i]),
    read(lines, i) {
      const [, hashes, title] = lines[i].match(HEADING);
      return [el("h" + Math.min(hashes.length + 2, 6), inline(title)), i + 1];
    },
  };

  const rule = {
    test: (lines, i) => RULE.test(lines[i]),
    read: (lines, i) => [el("hr"), i + 1],
  };

  const quote = {
    test: (lines, i) => QUOTE.test(lines[i]),
    read(lines, i) {
      const body = [];
      while (i < lines.length && QUOTE.test(lines[i])) body.push(lines[i++].replace(QUOTE, ""));
      return [el("blockquote", blocks(body.join("\n"))), i];
    },
  };

  const list = {
    test: (lines, i) => ITEM.test(lines[i]),
    read(lines, i) {
      const ordered = /\d/.test(lines[i].match(ITEM)[2]);
      const start = ordered ? parseInt(lines[i].match(ITEM)[2], 10) : 1;
      const items = [];
      while (i < lines.length) {
        const m = lines[i].match(ITEM);
        if (!m || /\d/.test(m[2]) !== ordered) break;
        const indent = m[0].length;
        const body = [lines[i].slice(indent)];
        i++;
        // the item goes on over indented lines, and over blank lines followed by indented ones
        while (i < lines.length && (/^\s{2,}\S/.test(lines[i]) || (!lines[i].trim() && i + 1 < lines.length
                                                                    && /^\s{2,}\S/.test(lines[i + 1])))) {
          body.push(lines[i].replace(new RegExp("^ {0," + indent + "}"), ""));
          i++;
        }
        items.push(listItem(body));
        if (i < lines.length && !lines[i].trim() && i + 1 < lines.length && ITEM.test(lines[i + 1])) i++;
      }
      const node = el(ordered ? "ol" : "ul", items);
      if (ordered && start !== 1) node.setAttribute("start", String(start));
      return [node, i];
    },
  };

  // a one-paragraph item keeps its text inline (no <p> margins); a longer one holds blocks
  function listItem(body) {
    const nested = blocks(body.join("\n"));
    if (nested.length === 1 && nested[0].tagName === "P") return el("li", [...nested[0].childNodes]);
    return el("li", nested);
  }

  const table = {
    test: (lines, i) => lines[i].includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1])
      && lines[i + 1].includes("-") && lines[i + 1].includes("|"),
    read(lines, i) {
      const head = el("tr", cells(lines[i]).map((c) => el("th", inline(c))));
      const rows = [];
      i += 2;
      while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
        rows.push(el("tr", cells(lines[i]).map((c) => el("td", inline(c)))));
        i++;
      }
      return [el("div", [el("table", [el("thead", [head]), el("tbody", rows)])], {class: "table-wrap"}), i];
    },
  };

  function cells(line) {
    return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
  }

  const paragraph = {
    read(lines, i) {
      const body = [lines[i++]];
      while (i < lines.length && lines[i].trim()
             && ![fence, heading, rule, quote, list, table].some((b) => b.test(lines, i))) {
        body.push(lines[i++]);
      }
      const children = [];
      body.forEach((line, n) => {
        if (n) children.push(el("br"));
        children.push(...inline(line.trim()));
      });
      return [el("p", children), i];
    },
  };

  // -- inline --------------------------------------------------------------------------------------

  const SAFE_URL = /^(https?:\/\/|mailto:)/i;

  const INLINE = [
    [/`+([^`\n]+?)`+/, (m) => el("code", m[1])],
    [/\*\*(?=\S)(.*?\S)\*\*/, (m) => el("strong", inline(m[1]))],
    [/__(?=\S)(.*?\S)__/, (m) => el("strong", inline(m[1]))],
    [/~~(?=\S)(.*?\S)~~/, (m) => el("del", inline(m[1]))],
    [/\*(?=[^\s*])([^*]*?[^\s*])\*/, (m) => el("em", inline(m[1]))],
    [/(?<![\w\\])_(?=[^\s_])([^_]*?[^\s_])_(?!\w)/, (m) => el("em", inline(m[1]))],
    [/!?\[([^\]\n]*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/, (m) => link(m[1] || m[2], m[2])],
    [/\bhttps?:\/\/[^\s<>()"']*[^\s<>()"'.,;:!?]/, (m) => link(m[0], m[0])],
  ];

  // a link only to a web or mail address; any other (javascript:, data:, relative) stays text
  function link(text, url) {
    if (!SAFE_URL.test(url)) return document.createTextNode(text);
    return el("a", inline(text), {href: url, target: "_blank", rel: "noopener noreferrer"});
  }

  // the nodes of one line of text: the earliest match of any pattern, then the rest, until none is left
  function inline(text) {
    const out = [];
    let rest = text;
    while (rest) {
      let best = null;
      for (const [pattern, build] of INLINE) {
        const m = pattern.exec(rest);
        if (m && (!best || m.index < best.m.index)) best = {m, build};
      }
      if (!best) { out.push(document.createTextNode(rest)); break; }
      if (best.m.index) out.push(document.createTextNode(rest.slice(0, best.m.index)));
      out.push(best.build(best.m));
      rest = rest.slice(best.m.index + best.m[0].length);
    }
    return out;
  }

  // `target`'s children become `text` rendered
  function render(text, target) {
    target.replaceChildren(...blocks(text || ""));
  }

  return {render, blocks, inline};
})();
