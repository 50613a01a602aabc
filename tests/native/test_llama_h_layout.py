"""Proves llamact/native/llama_h.py matches the vendored llama.cpp headers.

Two kinds of evidence:

* compiled: a generated C program includes ``llama.h`` and prints ``sizeof``,
  ``_Alignof`` and ``offsetof`` of every struct/field in ``llama_h.STRUCTS``,
  the value of every enumerator in ``llama_h.C_ENUMS`` and of every
  ``#define`` in ``llama_h.DEFINES``; the numbers must equal what ctypes says;
* parsed: the headers' declarations (functions, struct members, enumerators,
  callback typedefs) are read and compared with the Python tables: every
  declared name, parameter count and parameter/result type.

The vendored tree is ``<repo>/vendor/llama.cpp`` or ``$LLAMACT_LLAMA_CPP_DIR_TREE``.
A missing tree is a failure, not a skip.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from llamact.native import llama_h

REPO_ROOT = Path(__file__).resolve().parents[2]

GGML_HEADERS = ("ggml.h", "ggml-cpu.h", "ggml-backend.h", "ggml-opt.h", "gguf.h", "ggml-alloc.h")


# ---------------------------------------------------------------------------
# locating the tree and the compiler
# ---------------------------------------------------------------------------


def _tree() -> Path:
    env = os.environ.get("LLAMACT_LLAMA_CPP_DIR_TREE")
    root = Path(env) if env else REPO_ROOT / "vendor" / "llama.cpp"
    if not (root / "include" / "llama.h").is_file() or not (root / "ggml" / "include" / "ggml.h").is_file():
        pytest.fail(
            f"llama.cpp headers not found under {root} (include/llama.h, ggml/include/ggml.h); "
            "run `python scripts/vendor_llama_cpp.py` to fetch the pinned tree"
            + ("" if env else " (or set LLAMACT_LLAMA_CPP_DIR_TREE)"),
            pytrace=False,
        )
    return root


# Plain cached helpers rather than fixtures, so that a missing tree shows up
# as a FAILED test (pytest.fail inside the test), not as a setup error.


@functools.cache
def _headers() -> dict[str, str]:
    """Comment- and preprocessor-free text of llama.h and the ggml headers."""
    tree = _tree()
    out = {"llama.h": _clean((tree / "include" / "llama.h").read_text())}
    for name in GGML_HEADERS:
        path = tree / "ggml" / "include" / name
        if path.is_file():
            out[name] = _clean(path.read_text())
    return out


def _compiler() -> str:
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand and shutil.which(cand):
            return cand
    pytest.fail("no C compiler found (tried $CC, cc, gcc, clang)", pytrace=False)


def _compile_and_run(tree: Path, tmp_path: Path, name: str, body: list[str]) -> dict[str, list[int]]:
    """Compile a C program printing ``key n1 n2 ...`` lines; return {key: [n1, n2, ...]}."""
    src = tmp_path / f"{name}.c"
    exe = tmp_path / name
    src.write_text(
        '#include <stdio.h>\n#include <stddef.h>\n#include "llama.h"\n\n'
        "int main(void) {\n" + "\n".join("    " + line for line in body) + "\n    return 0;\n}\n"
    )
    cmd = [
        _compiler(),
        "-std=gnu11",
        "-I",
        str(tree / "include"),
        "-I",
        str(tree / "ggml" / "include"),
        str(src),
        "-o",
        str(exe),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        pytest.fail(f"compiling {src} failed:\n{' '.join(cmd)}\n{res.stderr[-6000:]}", pytrace=False)
    run = subprocess.run([str(exe)], capture_output=True, text=True, check=True)
    values: dict[str, list[int]] = {}
    for line in run.stdout.splitlines():
        key, *nums = line.split()
        values[key] = [int(n) for n in nums]
    return values


# ---------------------------------------------------------------------------
# header parsing
# ---------------------------------------------------------------------------


def _clean(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    src = re.sub(r"//[^\n]*", "", src)
    src = src.replace("\\\n", " ")
    return "\n".join(line for line in src.splitlines() if not line.lstrip().startswith("#"))


def _match_close(s: str, i: int, open_ch: str = "(", close_ch: str = ")") -> int:
    depth = 0
    for j in range(i, len(s)):
        if s[j] == open_ch:
            depth += 1
        elif s[j] == close_ch:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unbalanced {open_ch} at {i}")


def _split_top(s: str, sep: str = ",") -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [" ".join(p.split()) for p in parts if p.strip()]


_DEPRECATED_RE = re.compile(r"\b(?:GGML_)?DEPRECATED\s*\(")


def _unwrap_deprecated(s: str) -> str:
    """``DEPRECATED(decl, "hint")`` -> ``@DEPRECATED@ decl``."""
    out, pos = [], 0
    while m := _DEPRECATED_RE.search(s, pos):
        close = _match_close(s, m.end() - 1)
        inner = _split_top(s[m.end() : close])
        out.append(s[pos : m.start()] + " @DEPRECATED@ " + ", ".join(inner[:-1]))
        pos = close + 1
    out.append(s[pos:])
    return "".join(out)


_QUALIFIERS = {
    "const",
    "volatile",
    "restrict",
    "GGML_RESTRICT",
    "struct",
    "enum",
    "union",
    "unsigned",
    "signed",
}


def _param_type(param: str) -> str:
    """Drop the parameter name from a C parameter declaration."""
    toks = re.findall(r"\w+|\*", param.replace("GGML_RESTRICT", ""))
    words = [i for i, t in enumerate(toks) if t != "*"]
    if len(words) >= 2 and toks[-1] != "*":
        type_words = [toks[i] for i in words[:-1] if toks[i] not in _QUALIFIERS]
        if type_words:
            toks = toks[:-1]
    return " ".join(toks)


class Decl:
    def __init__(self, name: str, ret: str, params: list[str], deprecated: bool) -> None:
        self.name, self.ret, self.params, self.deprecated = name, ret, params, deprecated

    def __repr__(self) -> str:
        return f"{self.ret} {self.name}({', '.join(self.params)})"


def _functions(text: str, api: str) -> dict[str, Decl]:
    s = _unwrap_deprecated(text)
    decls: dict[str, Decl] = {}
    for m in re.finditer(rf"\b(?:{api})\b", s):
        try:
            end = s.index(";", m.end())
            p = s.index("(", m.end(), end)
            close = _match_close(s, p)
        except ValueError:
            continue  # not a function declaration
        head = s[m.end() : p]
        deprecated = "@DEPRECATED@" in head or bool(re.search(r"@DEPRECATED@\s*$", s[: m.start()]))
        head = head.replace("@DEPRECATED@", " ")
        nm = re.search(r"(\w+)\s*$", head)
        if not nm:
            continue
        raw = s[p + 1 : close].strip()
        params = [] if raw in ("", "void") else [_param_type(x) for x in _split_top(raw)]
        decls[nm.group(1)] = Decl(nm.group(1), " ".join(head[: nm.start()].split()), params, deprecated)
    return decls


def _enums(text: str) -> dict[str, list[str]]:
    return {
        m.group(1): [re.match(r"\s*(\w+)", e).group(1) for e in _split_top(m.group(2))]  # type: ignore[union-attr]
        for m in re.finditer(r"\benum\s+(\w+)\s*\{([^}]*)\}", text)
    }


_FNPTR_RE = re.compile(r"^(?P<ret>[^()]+?)\(\s*\*\s*(?P<name>\w+)\s*\)\s*\((?P<params>.*)\)$", re.S)


def _fnptr_typedefs(text: str) -> dict[str, Decl]:
    out = {}
    for m in re.finditer(r"\btypedef\s+([^;]*?\(\s*\*\s*\w+\s*\)\s*\([^;]*\))\s*;", text):
        fm = _FNPTR_RE.match(m.group(1).strip())
        if fm:
            raw = fm.group("params").strip()
            params = [] if raw in ("", "void") else [_param_type(x) for x in _split_top(raw)]
            out[fm.group("name")] = Decl(fm.group("name"), " ".join(fm.group("ret").split()), params, False)
    return out


def _pointer_typedefs(text: str) -> set[str]:
    return set(re.findall(r"\btypedef\s+(?:struct\s+)?\w+\s*\*\s*(\w+)\s*;", text))


def _struct_bodies(text: str) -> dict[str, str]:
    out = {}
    for m in re.finditer(r"\bstruct\s+(\w+)\s*\{", text):
        close = _match_close(text, m.end() - 1, "{", "}")
        out[m.group(1)] = text[m.end() : close]
    return out


def _struct_members(body: str) -> list[tuple[str, Any]]:
    """[(name, ("plain", ctype) | ("array", ctype, n) | ("fnptr", Decl) | ("union", members))]."""
    members: list[tuple[str, Any]] = []
    for decl in _split_top(body, ";"):
        if um := re.match(r"^union\s*\{(.*)\}$", decl, re.S):
            members.append(("", ("union", _struct_members(um.group(1)))))
        elif fm := _FNPTR_RE.match(decl):
            raw = fm.group("params").strip()
            params = [] if raw in ("", "void") else [_param_type(x) for x in _split_top(raw)]
            members.append(
                (fm.group("name"), ("fnptr", Decl(fm.group("name"), fm.group("ret").strip(), params, False)))
            )
        elif am := re.match(r"^(.+?)\b(\w+)\s*\[\s*(\w+)\s*\]$", decl):
            members.append((am.group(2), ("array", am.group(1).strip(), am.group(3))))
        elif pm := re.match(r"^(.+?)\b(\w+)$", decl):
            assert "," not in decl, decl
            members.append((pm.group(2), ("plain", pm.group(1).strip())))
        else:
            raise AssertionError(f"cannot parse struct member {decl!r}")
    return members


# ---------------------------------------------------------------------------
# C type <-> ctypes
# ---------------------------------------------------------------------------

_SCALARS: dict[str, Any] = {
    "bool": ctypes.c_bool,
    "_Bool": ctypes.c_bool,
    "char": ctypes.c_char,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "int": ctypes.c_int,
    "int8_t": ctypes.c_int8,
    "uint8_t": ctypes.c_uint8,
    "int16_t": ctypes.c_int16,
    "uint16_t": ctypes.c_uint16,
    "int32_t": ctypes.c_int32,
    "uint32_t": ctypes.c_uint32,
    "int64_t": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64,
    "size_t": ctypes.c_size_t,
    "llama_token": ctypes.c_int32,
    "llama_pos": ctypes.c_int32,
    "llama_seq_id": ctypes.c_int32,
    "llama_state_seq_flags": ctypes.c_uint32,
}

_CFuncPtr: Any = ctypes._CFuncPtr
_Pointer: Any = ctypes._Pointer


class TypeMatcher:
    """Decides whether a ctypes type is a faithful declaration of a C type string.

    Rules: scalars must be the exact ctypes type (enums: c_int); a struct by value
    must be the Structure of that name; ``c_void_p`` stands for any pointer;
    ``c_char_p`` for ``char *``; ``POINTER(T)`` must point at a match of the
    pointee; function-pointer typedefs must be the module's CFUNCTYPE of that
    name (or c_void_p); opaque pointer typedefs are c_void_p.
    """

    def __init__(self, headers: dict[str, str]) -> None:
        text = "\n".join(headers.values())
        self.fnptrs = _fnptr_typedefs(text)
        self.ptr_typedefs = _pointer_typedefs(text)

    @staticmethod
    def split(ctype: str) -> tuple[str | None, str, int]:
        toks = [t for t in re.findall(r"\w+|\*", ctype) if t not in ("const", "volatile", "GGML_RESTRICT")]
        stars = toks.count("*")
        words = [t for t in toks if t != "*"]
        kind = None
        if words and words[0] in ("struct", "enum", "union"):
            kind, words = words[0], words[1:]
        return kind, " ".join(words), stars

    def why_not(self, ctype: str, py: Any) -> str | None:
        """None if *py* matches *ctype*, else a reason."""
        kind, base, stars = self.split(ctype)
        return None if self._match(kind, base, stars, py) else f"C `{ctype}` vs ctypes {_name(py)}"

    def _match(self, kind: str | None, base: str, stars: int, py: Any) -> bool:
        if stars > 0:
            if py is ctypes.c_void_p:
                return True
            if py is ctypes.c_char_p:
                return stars == 1 and base == "char"
            if isinstance(py, type) and issubclass(py, _Pointer):
                return self._match(kind, base, stars - 1, py._type_)
            return False
        if base == "void":
            return py is None
        if kind == "enum":
            return py is ctypes.c_int
        if base in self.fnptrs:
            declared: Any = getattr(llama_h, base, None)
            return py is ctypes.c_void_p or (py is declared and issubclass(py, _CFuncPtr))
        if base in self.ptr_typedefs:
            return py is ctypes.c_void_p
        if base in _SCALARS:
            return py is _SCALARS[base]
        return isinstance(py, type) and issubclass(py, ctypes.Structure) and py.__name__ == base

    def signature_errors(self, decl: Decl, argtypes: list[Any], restype: Any) -> list[str]:
        errs = []
        if len(argtypes) != len(decl.params):
            return [f"{decl.name}: {len(argtypes)} argtypes, header has {len(decl.params)}: {decl!r}"]
        if (why := self.why_not(decl.ret, restype)) is not None:
            errs.append(f"{decl.name}: result: {why}")
        for i, (cparam, py) in enumerate(zip(decl.params, argtypes, strict=True)):
            if (why := self.why_not(cparam, py)) is not None:
                errs.append(f"{decl.name}: parameter {i}: {why}")
        return errs


def _name(py: Any) -> str:
    if py is None:
        return "None"
    if isinstance(py, type) and issubclass(py, _Pointer):
        return f"POINTER({_name(py._type_)})"
    return getattr(py, "__name__", repr(py))


@functools.cache
def _matcher() -> TypeMatcher:
    return TypeMatcher(_headers())


def _ctypes_fields(cls: type[ctypes.Structure]) -> list[tuple[str, Any]]:
    """(name, type) of the C-visible fields: anonymous members are expanded."""
    anonymous = set(getattr(cls, "_anonymous_", ()))
    out: list[tuple[str, Any]] = []
    fields: Any = cls._fields_
    for name, typ, *_ in fields:
        if name in anonymous:
            out.extend((sub, styp) for sub, styp, *_ in typ._fields_)
        else:
            out.append((name, typ))
    return out


# ---------------------------------------------------------------------------
# compiled checks
# ---------------------------------------------------------------------------


def test_struct_layout_matches_c(tmp_path: Path) -> None:
    tree = _tree()
    body = []
    for cname in llama_h.STRUCTS:
        st = f"struct {cname}"
        body.append(f'printf("{cname} %zu %zu\\n", sizeof({st}), (size_t)_Alignof({st}));')
        for fname, _ in _ctypes_fields(llama_h.STRUCTS[cname]):
            member = f"(({st} *)0)->{fname}"
            body.append(f'printf("{cname}.{fname} %zu %zu\\n", offsetof({st}, {fname}), sizeof({member}));')
    c = _compile_and_run(tree, tmp_path, "layout", body)

    errors = []
    for cname, cls in llama_h.STRUCTS.items():
        size, align = c[cname]
        if ctypes.sizeof(cls) != size:
            errors.append(f"{cname}: sizeof C={size} ctypes={ctypes.sizeof(cls)}")
        if ctypes.alignment(cls) != align:
            errors.append(f"{cname}: alignof C={align} ctypes={ctypes.alignment(cls)}")
        for fname, ftype in _ctypes_fields(cls):
            off, fsize = c[f"{cname}.{fname}"]
            py_off = getattr(cls, fname).offset
            if py_off != off:
                errors.append(f"{cname}.{fname}: offset C={off} ctypes={py_off}")
            if ctypes.sizeof(ftype) != fsize:
                errors.append(f"{cname}.{fname}: size C={fsize} ctypes={ctypes.sizeof(ftype)}")
    assert not errors, "struct layout mismatches:\n" + "\n".join(errors)


def test_enum_values_match_c(tmp_path: Path) -> None:
    tree = _tree()
    body = []
    expected: dict[str, int] = {}
    for cls, prefix in llama_h.C_ENUMS.values():
        for member, value in cls.__members__.items():
            cname = prefix + member
            expected[cname] = int(value)
            body.append(f'printf("{cname} %lld\\n", (long long){cname});')
    c = _compile_and_run(tree, tmp_path, "enums", body)
    errors = [f"{k}: C={c[k][0]} python={v}" for k, v in expected.items() if c[k][0] != v]
    assert not errors, "enum value mismatches:\n" + "\n".join(errors)


def test_defines_match_c(tmp_path: Path) -> None:
    tree = _tree()
    body = [f'printf("{n} %lld\\n", (long long)({n}));' for n in llama_h.DEFINES]
    c = _compile_and_run(tree, tmp_path, "defines", body)
    errors = [
        f"{n}: C={c[n][0]} python={getattr(llama_h, n)}"
        for n in llama_h.DEFINES
        if c[n][0] != getattr(llama_h, n)
    ]
    assert not errors, "#define mismatches:\n" + "\n".join(errors)


# ---------------------------------------------------------------------------
# parsed checks: structs and enums
# ---------------------------------------------------------------------------


def test_every_llama_h_struct_is_declared() -> None:
    headers = _headers()
    declared = set(_struct_bodies(headers["llama.h"]))
    assert declared - set(llama_h.STRUCTS) == set(), "structs of llama.h missing from llama_h.STRUCTS"


def test_struct_fields_match_header() -> None:
    headers = _headers()
    matcher = _matcher()
    bodies: dict[str, str] = {}
    for text in headers.values():
        bodies.update(_struct_bodies(text))
    errors = []
    for cname, cls in llama_h.STRUCTS.items():
        if cname not in bodies:
            errors.append(f"{cname}: no such struct in the headers")
            continue
        c_members = _struct_members(bodies[cname])
        fields: Any = cls._fields_
        py_fields: list[tuple[str, Any]] = [(n, t) for n, t, *_ in fields]
        if len(c_members) != len(py_fields):
            errors.append(
                f"{cname}: C has {len(c_members)} members {[n for n, _ in c_members]}, "
                f"ctypes has {len(py_fields)} {[n for n, _ in py_fields]}"
            )
            continue
        for (cfield, spec), (pfield, ptype) in zip(c_members, py_fields, strict=True):
            where = f"{cname}.{pfield}"
            if spec[0] == "union":
                if pfield not in getattr(cls, "_anonymous_", ()):
                    errors.append(f"{where}: C has an anonymous union here; declare it in _anonymous_")
                    continue
                sub_c = spec[1]
                sub_py = [(n, t) for n, t, *_ in ptype._fields_]
                if [n for n, _ in sub_c] != [n for n, _ in sub_py]:
                    errors.append(
                        f"{where}: union members C={[n for n, _ in sub_c]} ctypes={[n for n, _ in sub_py]}"
                    )
                    continue
                pairs = [(f"{cname}.{n}", s, t) for (n, s), (_, t) in zip(sub_c, sub_py, strict=True)]
            else:
                if cfield != pfield:
                    errors.append(f"{where}: C member at this position is `{cfield}`")
                    continue
                pairs = [(where, spec, ptype)]
            for w, sp, pt in pairs:
                if sp[0] == "plain":
                    if (why := matcher.why_not(sp[1], pt)) is not None:
                        errors.append(f"{w}: {why}")
                elif sp[0] == "array":
                    n = int(sp[2])
                    if not (isinstance(pt, type) and issubclass(pt, ctypes.Array) and pt._length_ == n):
                        errors.append(f"{w}: C array [{n}] vs ctypes {_name(pt)}")
                    elif (why := matcher.why_not(sp[1], pt._type_)) is not None:
                        errors.append(f"{w}: element: {why}")
                elif sp[0] == "fnptr":
                    if pt is ctypes.c_void_p:
                        continue
                    if not (isinstance(pt, type) and issubclass(pt, _CFuncPtr)):
                        errors.append(f"{w}: C function pointer vs ctypes {_name(pt)}")
                        continue
                    fn: Any = pt
                    errs = matcher.signature_errors(sp[1], list(fn._argtypes_), fn._restype_)
                    errors += [f"{w}: {e}" for e in errs]
    assert not errors, "struct member mismatches:\n" + "\n".join(errors)


def test_enums_complete() -> None:
    headers = _headers()
    all_enums: dict[str, list[str]] = {}
    for text in headers.values():
        all_enums.update(_enums(text))
    errors = []
    missing = set(_enums(headers["llama.h"])) - set(llama_h.C_ENUMS)
    if missing:
        errors.append(f"enums of llama.h not in llama_h.C_ENUMS: {sorted(missing)}")
    for cname, (cls, prefix) in llama_h.C_ENUMS.items():
        if cname not in all_enums:
            errors.append(f"enum {cname}: not found in the headers")
            continue
        c_names = set(all_enums[cname])
        py_names = {prefix + m for m in cls.__members__}
        if c_names - py_names:
            errors.append(f"enum {cname}: missing in {cls.__name__}: {sorted(c_names - py_names)}")
        if py_names - c_names:
            errors.append(f"enum {cname}: {cls.__name__} has extra {sorted(py_names - c_names)}")
    assert not errors, "\n".join(errors)


# ---------------------------------------------------------------------------
# parsed checks: functions and callbacks
# ---------------------------------------------------------------------------


def _check_table(
    table: dict[str, Any], decls: dict[str, Decl], matcher: TypeMatcher, where: str
) -> list[str]:
    errors = []
    for name, (argtypes, restype) in table.items():
        decl = decls.get(name)
        if decl is None:
            errors.append(f"{name}: not declared in {where}")
            continue
        errors += matcher.signature_errors(decl, argtypes, restype)
    return errors


def test_functions_match_llama_h() -> None:
    headers = _headers()
    matcher = _matcher()
    decls = _functions(headers["llama.h"], "LLAMA_API")
    assert len(decls) > 150, "the llama.h parser found suspiciously few declarations"
    errors = _check_table(llama_h.FUNCTIONS, decls, matcher, "llama.h")
    assert not errors, "FUNCTIONS vs llama.h:\n" + "\n".join(errors)


def test_every_llama_h_function_is_in_the_table() -> None:
    headers = _headers()
    decls = _functions(headers["llama.h"], "LLAMA_API")
    missing = sorted(set(decls) - set(llama_h.FUNCTIONS))
    assert not missing, f"declared in llama.h but not in FUNCTIONS: {missing}"


def test_deprecated_set_matches_header() -> None:
    headers = _headers()
    decls = _functions(headers["llama.h"], "LLAMA_API")
    deprecated = {n for n, d in decls.items() if d.deprecated}
    assert deprecated == set(llama_h.DEPRECATED_FUNCTIONS), (
        f"not marked: {sorted(deprecated - llama_h.DEPRECATED_FUNCTIONS)}; "
        f"marked but not deprecated: {sorted(llama_h.DEPRECATED_FUNCTIONS - deprecated)}"
    )


def test_ggml_functions_match_ggml_headers() -> None:
    headers = _headers()
    matcher = _matcher()
    decls: dict[str, Decl] = {}
    for name in GGML_HEADERS:
        if name in headers:
            decls.update(_functions(headers[name], "GGML_API|GGML_BACKEND_API"))
    errors = _check_table(llama_h.GGML_FUNCTIONS, decls, matcher, "the ggml headers")
    assert not errors, "GGML_FUNCTIONS vs ggml headers:\n" + "\n".join(errors)


def test_callback_types_match_typedefs() -> None:
    matcher = _matcher()
    errors: list[str] = []
    checked = set()
    for name, decl in matcher.fnptrs.items():
        py: Any = getattr(llama_h, name, None)
        if py is None or py is ctypes.c_void_p:
            continue
        if not (isinstance(py, type) and issubclass(py, _CFuncPtr)):
            errors.append(f"{name}: neither a CFUNCTYPE nor c_void_p")
            continue
        checked.add(name)
        errors += matcher.signature_errors(decl, list(py._argtypes_), py._restype_)
    must = {
        "llama_progress_callback",
        "ggml_log_callback",
        "ggml_abort_callback",
        "ggml_backend_sched_eval_callback",
    }
    assert must <= checked, f"not checked as CFUNCTYPEs: {sorted(must - checked)}"
    assert not errors, "callback typedef mismatches:\n" + "\n".join(errors)


# ---------------------------------------------------------------------------
# bind()
# ---------------------------------------------------------------------------


def test_bind_sets_prototypes_and_reports_missing() -> None:
    class Fn:
        argtypes: Any = None
        restype: Any = None

    class FakeLib:
        llama_n_ctx = Fn()
        llama_model_default_params = Fn()

    lib = FakeLib()
    table = {k: llama_h.FUNCTIONS[k] for k in ("llama_n_ctx", "llama_model_default_params", "llama_decode")}
    missing = llama_h.bind(lib, table)  # type: ignore[arg-type]
    assert missing == ["llama_decode"]
    assert lib.llama_n_ctx.argtypes == [llama_h.llama_context_p]
    assert lib.llama_n_ctx.restype is ctypes.c_uint32
    assert lib.llama_model_default_params.restype is llama_h.llama_model_params
