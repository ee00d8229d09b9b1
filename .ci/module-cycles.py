#!/usr/bin/env python3
"""Finds import cycles between the modules of a crate.

Reads the DOT graph `cargo modules dependencies` prints, keeps the "uses" edges between modules
(leaving aside a module and its own ancestors or descendants, which may use each other freely),
and prints every strongly connected component of more than one module. Exits 1 if there is
one, 2 if the graph has no module at all (the tool's output changed), 0 otherwise.
"""
import re
import sys

NODE = re.compile(r'^\s*"([^"]+)"\s*\[label="([^"]*)"')
EDGE = re.compile(r'^\s*"([^"]+)"\s*->\s*"([^"]+)"\s*\[label="([^"]+)"')


def related(a, b):
    return a == b or a.startswith(b + "::") or b.startswith(a + "::")


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


def main(path):
    modules, edges = set(), {}
    uses = []
    with open(path, encoding="utf-8") as dot:
        for line in dot:
            if m := EDGE.match(line):
                if m.group(3) == "uses":
                    uses.append((m.group(1), m.group(2)))
            elif m := NODE.match(line):
                if re.search(r"\bmod\|", m.group(2)):
                    modules.add(m.group(1))
    if not modules:
        print(f"module-cycles: no modules in {path}; has the tool's output changed?")
        return 2
    count = 0
    for a, b in uses:
        if a in modules and b in modules and not related(a, b):
            edges.setdefault(a, set()).add(b)
            count += 1
    cycles = [c for c in components(modules, edges) if len(c) > 1]
    print(f"module-cycles: {len(modules)} modules, {count} uses between them, {len(cycles)} cycles")
    for cycle in cycles:
        print("  cycle: " + " <-> ".join(cycle))
        members = set(cycle)
        for a in cycle:
            for b in sorted(edges.get(a, ())):
                if b in members:
                    print(f"    {a} uses {b}")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
