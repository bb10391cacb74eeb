#@save
from d2l_utils import checks


def bubble_fraction(p, m):
    """The share of a pipeline's time its ``p`` stages sit idle with ``m`` micro-batches: (p - 1) / (m + p - 1).

    With every stage equally fast, the last stage starts p - 1 slots after the first (the fill) and
    the first finishes p - 1 slots after the last (the drain), around m slots of work."""
    p, m = checks.integer(p, 'p', low=1), checks.integer(m, 'm', low=1)
    return (p - 1) / (m + p - 1)


def replay_pipeline(orders, forward=1.0, backward=2.0):
    """Replay the order in which each stage ran its micro-batches: ``(time of the step, idle share, spans)``.

    ``orders[s]`` lists stage s's actions, ``('F', i)`` or ``('B', i)`` for micro-batch i, each taking
    ``forward`` or ``backward`` units of time, or the time a third element gives. A forward waits for
    the previous stage's forward of its micro-batch, a backward for the next stage's backward.
    ``spans[s]`` lists stage s's (kind, i, start, end)."""
    p = len(orders)
    done, spans, free, nxt = {}, [[] for _ in orders], [0.0] * p, [0] * p
    while any(nxt[s] < len(orders[s]) for s in range(p)):
        moved = False
        for s in range(p):
            while nxt[s] < len(orders[s]):
                kind, i, *took = orders[s][nxt[s]]
                need = (s - 1, 'F', i) if kind == 'F' else (s + 1, 'B', i)
                if 0 <= need[0] < p and need not in done:
                    break                                   # waits for its neighbour
                start = max(free[s], done.get(need, 0.0))
                free[s] = done[s, kind, i] = start + (took[0] if took else forward if kind == 'F' else backward)
                spans[s].append((kind, i, start, free[s]))
                nxt[s], moved = nxt[s] + 1, True
        if not moved:
            raise ValueError(f'the orders wait on each other: stage s stops at action {nxt}')
    total = max(free)
    busy = sum(end - start for stage in spans for _, _, start, end in stage)
    return total, 1 - busy / (p * total), spans
