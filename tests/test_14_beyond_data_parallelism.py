"""Unit tests of the helpers of lesson 14 (notebooks/14_beyond_data_parallelism.ipynb).

Pure functions only: the lesson's torchrun launches are tested by running the notebook.
"""
import math

import pytest

import d2l_utils as d2l


def gpipe(p, m):
    """GPipe's order on each of p stages: every forward, then every backward."""
    return [[('F', i) for i in range(m)] + [('B', i) for i in range(m)] for _ in range(p)]


def one_f_one_b(p, m):
    """1F1B's order: stage s runs p - s forwards, then alternates a backward and a forward."""
    orders = []
    for s in range(p):
        warm = min(m, p - s)
        order = [('F', i) for i in range(warm)]
        for i in range(m):
            order.append(('B', i))
            if warm + i < m:
                order.append(('F', warm + i))
        orders.append(order)
    return orders


@pytest.mark.parametrize('p, m, expected', [(1, 4, 0.0), (2, 1, 0.5), (2, 4, 0.2), (4, 4, 3 / 7), (4, 16, 3 / 19)])
def test_bubble_fraction_is_p_minus_1_over_m_plus_p_minus_1(p, m, expected):
    assert math.isclose(d2l.bubble_fraction(p, m), expected)


@pytest.mark.parametrize('p, m, error', [(0, 4, ValueError), (2, 0, ValueError), (2.0, 4, TypeError), (True, 4, TypeError)])
def test_bubble_fraction_rejects_bad_arguments(p, m, error):
    with pytest.raises(error):
        d2l.bubble_fraction(p, m)


@pytest.mark.parametrize('schedule', [gpipe, one_f_one_b])
@pytest.mark.parametrize('p, m', [(2, 2), (2, 8), (4, 4), (4, 16), (3, 5)])
def test_replayed_bubble_follows_the_model(schedule, p, m):
    total, bubble, spans = d2l.replay_pipeline(schedule(p, m))
    assert math.isclose(bubble, d2l.bubble_fraction(p, m), rel_tol=1e-12)
    assert total == (m + p - 1) * 3                 # forward 1, backward 2
    assert [len(s) for s in spans] == [2 * m] * p


def test_replay_waits_for_the_neighbouring_stage():
    _, _, spans = d2l.replay_pipeline(gpipe(2, 1))
    assert spans == [[('F', 0, 0.0, 1.0), ('B', 0, 4.0, 6.0)], [('F', 0, 1.0, 2.0), ('B', 0, 2.0, 4.0)]]


def test_replay_uses_the_times_given_with_each_action():
    orders = [[('F', 0, 1.0), ('B', 0, 2.0)], [('F', 0, 3.0), ('B', 0, 6.0)]]   # the last stage 3 x slower
    total, bubble, _ = d2l.replay_pipeline(orders)
    assert total == 12.0 and math.isclose(bubble, 1 - 12 / 24)


def test_replay_of_one_stage_has_no_bubble():
    total, bubble, _ = d2l.replay_pipeline(gpipe(1, 3))
    assert (total, bubble) == (9.0, 0.0)


def test_replay_names_orders_that_wait_on_each_other():
    # stage 0 wants micro-batch 1's backward before its forward: never possible
    orders = [[('F', 0), ('B', 1), ('F', 1), ('B', 0)], [('F', 0), ('F', 1), ('B', 0), ('B', 1)]]
    with pytest.raises(ValueError, match='wait on each other'):
        d2l.replay_pipeline(orders)


def test_parallel_plans_defaults_are_the_lessons_run():
    plans = {(p['tp'], p['pp']): p for p in d2l.parallel_plans(32, 4)}
    assert set(plans) == {(1, 1), (1, 2), (2, 1)}           # 2 GPUs: one of each
    assert plans[2, 1]['tp_allreduce_bytes'] == 4 * 16 * 32 * 4   # the all-reduce the lesson counted
    assert math.isclose(plans[1, 2]['bubble'], 0.2)           # 2 stages, 4 micro-batches


def test_parallel_plans_split_every_gpu_count():
    plans = d2l.parallel_plans(4096, 32, 'H100', 64, tokens=2**20, micro=8, value_bytes=2)
    assert all(p['tp'] * p['pp'] * p['dp'] == 64 and p['tp'] <= 8 for p in plans)
    assert all(p['step_s'] >= p['compute_s'] > 0 for p in plans)
    assert len({p['compute_s'] for p in plans}) == 1          # the same work, however split


def test_tensor_parallel_over_the_network_costs_more_than_over_nvlink():
    inside = {(p['tp'], p['pp']): p for p in d2l.parallel_plans(4096, 32, 'H100', 8, tokens=2**20, value_bytes=2)}
    across = {(p['tp'], p['pp']): p for p in d2l.parallel_plans(4096, 32, 'H100', 8, tokens=2**20, value_bytes=2, per_node=4)}
    assert (8, 1) in inside and (8, 1) not in across          # tensor parallelism stays inside a node
    assert across[1, 1]['dp_s'] > inside[1, 1]['dp_s']        # FSDP over the network is slower


def test_parallel_plans_fit_the_gpus_memory():
    small = d2l.parallel_plans(1024, 8, 'H100', 2, tokens=2**14, value_bytes=2)
    huge = d2l.parallel_plans(16384, 128, 'T4', 2, tokens=2**14, value_bytes=2)
    assert all(p['fits'] for p in small) and not any(p['fits'] for p in huge)


@pytest.mark.parametrize('kwargs, error', [({'width': 0, 'layers': 4}, ValueError), ({'width': 32, 'layers': 4.5}, TypeError),
                                           ({'width': 32, 'layers': 4, 'gpus': 0}, ValueError),
                                           ({'width': 32, 'layers': 4, 'gpu': 'B200'}, KeyError)])
def test_parallel_plans_rejects_bad_arguments(kwargs, error):
    with pytest.raises(error):
        d2l.parallel_plans(**kwargs)
