#!/usr/bin/env python3
"""Finds import cycles between the modules of a crate, read from its source.

Every `.rs` file below the source folder is a module (`a/mod.rs` and `a.rs` are `a`; the
`lib.rs` is the crate). A module uses another when a `use` item, or a path anywhere in its
code (`crate::a::b::run(…)`, `super::x::LIMIT`), names it or something in it: the path is
resolved from the file's module and cut to the longest module it reaches. Inline `mod tests`
blocks and comments and strings are left out.

A use of `a::x::y` by `a::z` counts as a use of the subtree `a::x` by the subtree `a::z`: each
edge is lifted to the two sibling modules right below the closest module both ends share, so
that a cycle through submodules is found too, while a module and its own descendants may use
each other freely. Prints every cycle among siblings with the uses behind it. Exits 1 if there
is one, 2 if the folder holds no module, 0 otherwise.

Usage: module-cycles.py SRC_DIR [EXCLUDED_SUBFOLDER...]
"""
import os
import re
import sys

COMMENT_OR_STRING = re.compile(
    r'//[^\n]*|/\*.*?\*/|r(#*)"(?:.|\n)*?"\1|b?"(?:\\.|[^"\\])*"|b?\'(?:\\.|[^\'\\])\'',
    re.S,
)
USE = re.compile(r"\buse\s+([^;]+);")
PATH = re.compile(r"\b(?:crate|super|self)(?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)+")
TESTS = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def module_of(src, path):
    parts = os.path.relpath(path, src)[: -len(".rs")].split(os.sep)
    if len(parts) == 1 and parts[0] in ("lib", "main"):
        return "crate"
    if parts[-1] == "mod":
        parts = parts[:-1]
    return "::".join(["crate"] + parts)


def code_of(text):
    """The file's code without comments, strings and its inline test module."""
    text = COMMENT_OR_STRING.sub(lambda m: '""' if m.group(0).startswith(("r", "b", '"')) else " ", text)
    if m := TESTS.search(text):
        text = text[: m.start()]
    return text


def use_paths(tree):
    """The paths a `use` tree names: `a::{b, c::{d as e}}` gives `a::b`, `a::c::d`."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)

    def walk(prefix, t):
        if "{" not in t:
            for part in t.split(","):
                if part:
                    yield prefix + part
            return
        i = t.index("{")
        depth, parts, current = 0, [], ""
        for ch in t[i + 1 : -1]:
            if ch == "," and depth == 0:
                parts.append(current)
                current = ""
                continue
            depth += (ch == "{") - (ch == "}")
            current += ch
        parts.append(current)
        for part in parts:
            if part:
                yield from walk(prefix + t[:i], part)

    yield from walk("", tree)


def resolve(here, path, modules):
    """The module `path`, written in module `here`, reaches; None outside the crate."""
    parts = [p for p in re.split(r"\s*::\s*", path.strip()) if p]
    at = here.split("::")
    if not parts or parts[0] not in ("crate", "super", "self"):
        # A path from a child module of `here` (or another crate): never a cycle.
        return None
    while parts and parts[0] in ("crate", "super", "self"):
        head = parts.pop(0)
        if head == "crate":
            at = ["crate"]
        elif head == "super":
            at = at[:-1]
    full = at + parts
    while full and "::".join(full) not in modules:
        full = full[:-1]
    return "::".join(full) if full else None


def lift(a, b):
    """The sibling subtrees `a` and `b` lie in, or None when one contains the other."""
    pa, pb = a.split("::"), b.split("::")
    shared = 0
    while shared < min(len(pa), len(pb)) and pa[shared] == pb[shared]:
        shared += 1
    if shared in (len(pa), len(pb)):
        return None
    return "::".join(pa[: shared + 1]), "::".join(pb[: shared + 1])


def components(nodes, edges):
    """Tarjan's algorithm, iterative so deep graphs do not hit the recursion limit."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return found


def main(src, excluded):
    files = {}
    for folder, dirs, names in os.walk(src):
        dirs[:] = sorted(d for d in dirs if os.path.join(folder, d) not in excluded)
        for name in sorted(names):
            if name.endswith(".rs"):
                path = os.path.join(folder, name)
                files[module_of(src, path)] = path
    if not files:
        print(f"module-cycles: no modules in {src}")
        return 2
    modules = set(files) | {"crate"}
    edges, behind = {}, {}
    for module, path in sorted(files.items()):
        with open(path, encoding="utf-8") as f:
            code = code_of(f.read())
        named = set()
        for tree in USE.findall(code):
            named.update(use_paths(tree))
        named.update(m.group(0) for m in PATH.finditer(USE.sub("", code)))
        for path_text in sorted(named):
            target = resolve(module, path_text, modules)
            if target and (pair := lift(module, target)):
                edges.setdefault(pair[0], set()).add(pair[1])
                behind.setdefault(pair, []).append(f"{module} uses {target} ({path_text})")
    count = sum(len(v) for v in behind.values())
    cycles = [c for c in components(modules, edges) if len(c) > 1]
    print(f"module-cycles: {len(modules)} modules, {count} uses between them, {len(cycles)} cycles")
    for cycle in cycles:
        print("  cycle: " + " <-> ".join(cycle))
        members = set(cycle)
        for a in cycle:
            for b in sorted(edges.get(a, ())):
                if b in members:
                    for use in behind[(a, b)]:
                        print(f"    {use}")
    return 1 if cycles else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    src = os.path.normpath(sys.argv[1])
    sys.exit(main(src, {os.path.normpath(os.path.join(src, d)) for d in sys.argv[2:]}))
