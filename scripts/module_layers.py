#!/usr/bin/env python3
"""The module drawing of docs/design.md, made from the build files, and the checks behind it.

Reads every `tangram_module(name deps...)` of CMakeLists.txt (and the `tangram` executable's
links), puts each module on the layer above the highest module it links, and draws one line per
module: its name and the modules it links directly, top layer first. It also checks what the
drawing promises: no cycle among the links, and no file of src/<module>/ including a header of a
module that <module> does not link, directly or through others.

  scripts/module_layers.py            print the drawing
  scripts/module_layers.py --check    exit 1 when docs/design.md's drawing differs from it, or a
                                      check fails (CTest runs this)
  scripts/module_layers.py --write    rewrite the drawing in docs/design.md
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BEGIN = "<!-- module drawing: made by scripts/module_layers.py --write; do not edit by hand -->"
END = "<!-- end of module drawing -->"


def read_links():
    """{module: [tangram modules it links, in the order written]} plus the executable's."""
    text = (ROOT / "CMakeLists.txt").read_text()
    text = re.sub(r"#[^\n]*", "", text)
    links = {}
    for m in re.finditer(r"tangram_module\(\s*(\w+)([^)]*)\)", text):
        links[m.group(1)] = re.findall(r"\btangram_(\w+)", m.group(2))
    exe = re.search(r"target_link_libraries\(\s*tangram\s+PRIVATE([^)]*)\)", text)
    if exe:
        links["cli"] = re.findall(r"\btangram_(\w+)", exe.group(1))
    return links


def layers_of(links):
    """Layer of each module (0 for those linking none); an error on a cycle or unknown module."""
    layer, visiting = {}, set()

    def visit(m, path):
        if m in layer:
            return layer[m]
        if m not in links:
            raise SystemExit(f"module_layers: {path[-2] if len(path) > 1 else '?'} links "
                             f"tangram_{m}, which is not a module")
        if m in visiting:
            raise SystemExit("module_layers: link cycle " + " -> ".join(path + [m]))
        visiting.add(m)
        layer[m] = 1 + max((visit(d, path + [m]) for d in links[m]), default=-1)
        visiting.discard(m)
        return layer[m]

    for m in links:
        visit(m, [])
    return layer


def closure(links, m):
    seen, todo = set(), [m]
    while todo:
        for d in links[todo.pop()]:
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def include_violations(links):
    """Files including a header of a module their module does not link."""
    bad = []
    for m in links:
        allowed = closure(links, m) | {m}
        for f in sorted((ROOT / "src" / m).glob("*")):
            if f.suffix not in (".h", ".cpp"):
                continue
            for inc in re.findall(r'#include "(\w+)/', f.read_text()):
                if (ROOT / "src" / inc).is_dir() and inc not in allowed:
                    bad.append(f"src/{m}/{f.name} includes {inc}/ but {m} does not link it")
    return bad


def drawing(links):
    layer = layers_of(links)
    order = sorted(links, key=lambda m: (-layer[m], m))
    width = max(len(m) for m in links)
    lines = ["```"]
    for m in order:
        deps = sorted(links[m], key=lambda d: (-layer[d], d))
        arrow = " ──> " + ", ".join(deps) if deps else ""
        lines.append(f"{layer[m]:>2}  {m:<{width}}{arrow}".rstrip())
    lines.append("```")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    links = read_links()
    text = drawing(links)
    bad = include_violations(links)
    for b in bad:
        print("module_layers: " + b, file=sys.stderr)
    if not a.check and not a.write:
        print(text)
        return 1 if bad else 0
    doc_path = ROOT / "docs" / "design.md"
    doc = doc_path.read_text()
    block = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not block.search(doc):
        print(f"module_layers: docs/design.md has no drawing between '{BEGIN}' and '{END}'",
              file=sys.stderr)
        return 1
    new = block.sub(lambda _: BEGIN + "\n" + text + "\n" + END, doc)
    if a.write:
        doc_path.write_text(new)
        return 1 if bad else 0
    if new != doc:
        print("module_layers: docs/design.md's module drawing is not the build's; run "
              "scripts/module_layers.py --write", file=sys.stderr)
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
