"""Bipartite matching for the comparator: Hopcroft-Karp and a perfect-matching uniqueness test.

Both are iterative (no recursion, so no recursion limit on 100,000-row
results) and work on adjacency lists: ``adj[u]`` lists the right-hand vertices
that left vertex ``u`` may be matched with.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["max_matching", "unique_perfect_matching"]


def max_matching(adj: Sequence[Sequence[int]], n_right: int) -> tuple[int, list[int]]:
    """The size of a maximum matching and, per left vertex, its partner (or -1).

    A greedy pass seeds the matching; Hopcroft-Karp phases (a BFS that layers
    the graph from every free left vertex, then vertex-disjoint augmenting
    paths found by an explicit-stack DFS) run until no augmenting path is left.

    >>> max_matching([[0, 1], [0], [1]], 2)[0]
    2
    >>> max_matching([[0], [0]], 1)
    (1, [0, -1])
    """
    n_left = len(adj)
    match_l = [-1] * n_left
    match_r = [-1] * n_right
    size = 0
    for u, nbrs in enumerate(adj):
        for v in nbrs:
            if match_r[v] == -1:
                match_l[u] = v
                match_r[v] = u
                size += 1
                break
    # No matching can exceed the number of vertices that have an edge on either side;
    # stopping there avoids a last, fruitless BFS over a possibly dense graph.
    limit = min(sum(map(bool, adj)), n_right)
    while size < limit:
        free = [u for u in range(n_left) if match_l[u] == -1 and adj[u]]
        dist = [-1] * n_left
        for u in free:
            dist[u] = 0
        queue = list(free)
        found = False
        head = 0
        while head < len(queue):
            u = queue[head]
            head += 1
            for v in adj[u]:
                w = match_r[v]
                if w == -1:
                    found = True
                elif dist[w] == -1:
                    dist[w] = dist[u] + 1
                    queue.append(w)
        if not found:
            break
        grown = _augment_phase(adj, free, dist, match_l, match_r)
        if grown == 0:
            break
        size += grown
    return size, match_l


def _augment_phase(
    adj: Sequence[Sequence[int]],
    free: list[int],
    dist: list[int],
    match_l: list[int],
    match_r: list[int],
) -> int:
    """One phase: vertex-disjoint augmenting paths along the BFS layers."""
    ptr = [0] * len(adj)
    grown = 0
    for root in free:
        stack = [root]
        vias: list[int] = []  # vias[i] is the right vertex that led from stack[i] to stack[i+1]
        while stack:
            u = stack[-1]
            nbrs = adj[u]
            pushed = False
            while ptr[u] < len(nbrs):
                v = nbrs[ptr[u]]
                ptr[u] += 1
                w = match_r[v]
                if w == -1:
                    # Augment: every vertex on the stack takes the right vertex one step ahead.
                    match_l[u] = v
                    match_r[v] = u
                    for i in range(len(vias) - 1, -1, -1):
                        match_l[stack[i]] = vias[i]
                        match_r[vias[i]] = stack[i]
                    grown += 1
                    stack = []
                    pushed = True
                    break
                if dist[w] == dist[u] + 1:
                    stack.append(w)
                    vias.append(v)
                    pushed = True
                    break
            if not pushed:
                dist[u] = -1  # dead end for the rest of this phase
                stack.pop()
                if vias:
                    vias.pop()
    return grown


def unique_perfect_matching(adj: Sequence[Sequence[int]], n_right: int) -> tuple[str, list[int]]:
    """Whether the graph has no, exactly one, or several perfect matchings.

    Returns ``("none", [])``, ``("unique", partner_of_left)`` or ``("several", [])``.
    One perfect matching M is found with Hopcroft-Karp; it is the only one
    exactly when there is no M-alternating cycle, i.e. when the directed graph
    "left u -> left u' whenever u may take u''s partner" has no cycle.
    Nothing is enumerated, so 30 interchangeable columns cost microseconds.

    >>> unique_perfect_matching([[0, 1], [1]], 2)
    ('unique', [0, 1])
    >>> unique_perfect_matching([[0, 1], [0, 1]], 2)[0]
    'several'
    >>> unique_perfect_matching([[0], [0]], 2)[0]
    'none'
    """
    n = len(adj)
    if n != n_right:
        return "none", []
    size, match_l = max_matching(adj, n_right)
    if size < n:
        return "none", []
    owner = [-1] * n_right
    for u, v in enumerate(match_l):
        owner[v] = u
    succ = [[owner[v] for v in adj[u] if v != match_l[u]] for u in range(n)]
    # Iterative three-colour DFS: a grey successor closes a cycle.
    colour = [0] * n  # 0 white, 1 grey (on the stack), 2 black
    for start in range(n):
        if colour[start]:
            continue
        colour[start] = 1
        stack = [(start, 0)]
        while stack:
            u, i = stack[-1]
            if i < len(succ[u]):
                stack[-1] = (u, i + 1)
                w = succ[u][i]
                if colour[w] == 1:
                    return "several", []
                if colour[w] == 0:
                    colour[w] = 1
                    stack.append((w, 0))
            else:
                colour[u] = 2
                stack.pop()
    return "unique", match_l
