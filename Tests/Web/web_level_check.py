#!/usr/bin/env python3
"""The page uses nothing newer than docs/web-page.md says it needs (`make test-web`).

The stated level is ES2020 plus `Element.replaceChildren` (Chrome/Edge 86, Firefox 78, Safari 14,
all late 2020), browsers `make test-web` cannot run. This is a syntax-level look, not a parser:
webpage/*.js with its comments and quoted strings blanked, and webpage/*.css and index.html with
their comments blanked, searched for what those browsers lack: JavaScript syntax and built-ins
from ES2021 on, and later web APIs and CSS. It finds a use by its name, so it misses one reached
another way (obj["at"]); a hit in the list below fails the lane with the file and line.
Before looking, each pattern is tried on an example it must catch, so a broken pattern fails too.

usage: web_level_check.py DIR
"""

import pathlib
import re
import sys

# (what, first in, pattern, an example it must catch)
SCRIPT = [
    ("logical assignment ||= &&= ??=", "ES2021", r"(\|\||&&|\?\?)=", "a ??= 1"),
    ("numeric separator", "ES2021", r"\b\d+_\d", "1_000"),
    ("String.prototype.replaceAll", "ES2021", r"\.replaceAll\s*\(", "s.replaceAll('a', 'b')"),
    ("Promise.any / AggregateError", "ES2021", r"\bPromise\.any\b|\bAggregateError\b", "Promise.any([])"),
    ("WeakRef / FinalizationRegistry", "ES2021", r"\b(WeakRef|FinalizationRegistry)\b", "new WeakRef(o)"),
    ("class fields, #private names", "ES2022", r"(^|[\s;{.])#[A-Za-z_$]|\bstatic\s*\{", "this.#count"),
    ("Array/String .at()", "ES2022", r"\.at\s*\(", "list.at(-1)"),
    ("Object.hasOwn", "ES2022", r"\bObject\.hasOwn\b", "Object.hasOwn(o, 'a')"),
    ("Error cause", "ES2022", r"\bcause\s*:", "new Error('x', { cause: e })"),
    ("top-level await", "ES2022", r"^await\b", "await load()"),
    ("findLast / findLastIndex", "ES2023", r"\.findLast(Index)?\s*\(", "a.findLast((x) => x)"),
    ("change-by-copy arrays", "ES2023", r"\.(toSorted|toReversed|toSpliced)\s*\(|\.with\s*\(\s*-?\d", "a.toSorted()"),
    ("Object/Map.groupBy", "ES2024", r"\b(Object|Map)\.groupBy\b", "Object.groupBy(a, f)"),
    ("Promise.withResolvers", "ES2024", r"\bPromise\.withResolvers\b", "Promise.withResolvers()"),
    ("Array.fromAsync", "ES2024", r"\bArray\.fromAsync\b", "Array.fromAsync(it)"),
    ("regular expression v flag", "ES2024",
     r"/[dgimsuy]*v[dgimsuy]*\.test\(|new RegExp\([^)]*['\"][dgimsuy]*v", "/x/v.test(s)"),
    ("structuredClone", "2022 browsers", r"\bstructuredClone\s*\(", "structuredClone(o)"),
    ("AbortSignal.timeout / .any", "2022 browsers", r"\bAbortSignal\.(timeout|any)\b", "AbortSignal.timeout(5000)"),
    ("Navigation API", "2022 browsers", r"\bnavigation\.(navigate|addEventListener)\b", "navigation.navigate('/')"),
    (":has() selector in script", "2022 browsers", r":has\(", "document.querySelector('a:has(b)')"),
]
STYLE = [
    (":has() / :is() / :where()", "2021-2022 browsers", r":(has|is|where)\(", "a:has(b) {}"),
    ("container queries", "2022 browsers", r"@container|\bcontainer-type\b", "@container (width > 1px) {}"),
    ("cascade layers", "2022 browsers", r"@layer\b", "@layer base;"),
    ("nesting", "2023 browsers", r"^\s*&", "a {\n  & b {}\n}"),
    ("color-mix() / relative colours", "2023 browsers",
     r"\bcolor-mix\(|\bfrom\s+(#|rgb|hsl|var)", "color-mix(in srgb, red, blue)"),
    ("aspect-ratio", "Chrome 88", r"\baspect-ratio\s*:", "aspect-ratio: 1"),
    ("inset", "Chrome 87", r"(^|[;{\s])inset\s*:", "a { inset: 0 }"),
    ("accent-color", "Chrome 93", r"\baccent-color\s*:", "accent-color: red"),
    ("viewport units dvh/svh/lvh", "2022 browsers", r"\d(d|s|l)v(h|w)\b", "height: 100dvh"),
    ("text-wrap", "2023 browsers", r"\btext-wrap\s*:", "text-wrap: balance"),
]


def blank(text, pattern):
    """The text with each match replaced by spaces, newlines kept (line numbers stay right)."""
    return re.sub(pattern, lambda match: re.sub(r"[^\n]", " ", match.group(0)), text)


def script_code(text):
    # Comments, and '…' "…" strings (not template literals: their ${} parts are code).
    return blank(text, r"//[^\n]*|/\*.*?\*/|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\"")


def style_code(text):
    return blank(text, r"/\*.*?\*/|<!--.*?-->")


def hits(code, patterns):
    for what, first, pattern, _ in patterns:
        for match in re.finditer(pattern, code, re.MULTILINE | re.DOTALL):
            yield code.count("\n", 0, match.start()) + 1, what, first


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    failures = []
    for what, _, pattern, example in SCRIPT + STYLE:
        if not re.search(pattern, example, re.MULTILINE):
            failures.append(f"the pattern for {what} does not catch its example {example!r}")
    directory = pathlib.Path(sys.argv[1])
    files = sorted(directory.glob("*.js")) + sorted(directory.glob("*.css")) + sorted(directory.glob("*.html"))
    if not files:
        failures.append(f"no .js, .css or .html files in {directory}")
    for path in files:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".js":
            found = hits(script_code(text), SCRIPT)
        else:
            # index.html: its markup and inline style only (the page has no inline script: CSP).
            found = hits(style_code(text), STYLE)
        failures += [f"{path}:{line}: {what} ({first})" for line, what, first in found]
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    if failures:
        print("the page would need newer browsers than docs/web-page.md states (ES2020, late 2020)", file=sys.stderr)
        return 1
    names = ", ".join(path.name for path in files)
    print(f"ok: {names} use nothing after ES2020 / late-2020 CSS of the {len(SCRIPT) + len(STYLE)} kinds looked for")
    return 0


if __name__ == "__main__":
    sys.exit(main())
