#!/usr/bin/env python3
"""Finds import cycles between the modules of a crate.

Reads the DOT graph `cargo modules dependencies` prints and keeps its "uses" edges between
modules. A use of `a::x::y` by `a::z` counts as a use of the subtree `a::x` by the subtree
`a::z`: each edge is lifted to the two sibling modules right below the closest module both ends
share, so that a cycle through submodules (`a::x::y` uses `a::z`, `a::z` uses `a::x`) is found
too, while a module and its own descendants may use each other freely. Prints every cycle
among siblings with the uses behind it. Exits 1 if there is one, 2 if the graph has no module
at all (the tool's output changed), 0 otherwise.
"""
import re
import sys

NODE = re.compile(r'^\s*"([^"]+)"\s*\[label="([^"]*)"')
EDGE = re.compile(r'^\s*"([^"]+)"\s*->\s*"([^"]+)"\s*\[label="([^"]+)"')


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
    edges, behind = {}, {}
    for a, b in uses:
        if a in modules and b in modules and (pair := lift(a, b)):
            edges.setdefault(pair[0], set()).add(pair[1])
            behind.setdefault(pair, []).append(f"{a} uses {b}")
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
    sys.exit(main(sys.argv[1]))
