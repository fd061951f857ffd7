"""The double binary tree, as NCCL builds it across nodes: two binary trees over the same ranks in
which (almost) every inner rank of one is a leaf of the other (the shape is described in
commbench.algorithms.dbtree). One owner for both users: the dbtree algorithm and the kernels' tree
(commbench.kernels.abi)."""

from __future__ import annotations


def inorder_tree(n: int) -> tuple[list[int | None], list[list[int]]]:
    """parent[r] and children[r] of tree A (see the module docstring)."""
    children: list[list[int]] = [[] for _ in range(n)]
    if n > 1:
        children[0].append(1 << (n - 1).bit_length() - 1)
    for r in range(1, n):
        h = (r & -r).bit_length() - 1
        if h == 0:
            continue
        children[r].append(r - (1 << (h - 1)))
        for j in range(h - 1, -1, -1):
            if r + (1 << j) < n:
                children[r].append(r + (1 << j))
                break
    parent: list[int | None] = [None] * n
    for r, kids in enumerate(children):
        for c in kids:
            parent[c] = r
    return parent, children


def double_tree(n: int) -> list[tuple[list[int | None], list[list[int]]]]:
    """Trees A and B as (parent, children) over real ranks."""
    pa, ca = inorder_tree(n)
    shift = lambda r: (r + 1) % n  # noqa: E731 - position q of A is rank q+1 in B
    pb: list[int | None] = [None] * n
    cb: list[list[int]] = [[] for _ in range(n)]
    for q in range(n):
        pb[shift(q)] = None if pa[q] is None else shift(pa[q])
        cb[shift(q)] = [shift(c) for c in ca[q]]
    return [(pa, ca), (pb, cb)]
