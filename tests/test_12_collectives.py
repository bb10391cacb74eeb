"""Unit tests of the helpers of lesson 12 (notebooks/12_collectives_and_sharding.ipynb).

Pure functions only: the lesson's one torchrun launch is tested by running the notebook.
"""
import json

import pytest

import d2l_utils as d2l


@pytest.mark.parametrize('n, expected', [(1, 0), (2, 1024), (4, 1536), (8, 1792)])
def test_ring_allreduce_bytes_is_2_n_minus_1_over_n(n, expected):
    assert d2l.ring_allreduce_bytes(1024, n) == expected


def test_ring_bytes_stay_below_twice_the_tensor():
    assert d2l.ring_allreduce_bytes(2**30, 1024) < 2 * 2**30


@pytest.mark.parametrize('nbytes, n, error', [(1.5, 2, TypeError), (True, 2, TypeError), (1024, 2.0, TypeError),
                                              (-1, 2, ValueError), (1024, 0, ValueError)])
def test_ring_allreduce_bytes_rejects_bad_arguments(nbytes, n, error):
    with pytest.raises(error):
        d2l.ring_allreduce_bytes(nbytes, n)


def test_bus_bandwidth_follows_nccl_tests():
    # algorithm bandwidth 1e9 B/s; nccl-tests' factor 2(n-1)/n for all-reduce
    assert d2l.bus_bandwidth(10**9, 1.0, 2) == pytest.approx(1e9)
    assert d2l.bus_bandwidth(10**9, 1.0, 8) == pytest.approx(1.75e9)
    with pytest.raises(ValueError):
        d2l.bus_bandwidth(1024, 0, 2)
    with pytest.raises(TypeError):
        d2l.bus_bandwidth(1024, '1', 2)


def _write(folder, part, rank, result):
    (folder / f'{part}-rank{rank}.json').write_text(json.dumps(result))


def test_read_rank_results_in_rank_order(tmp_path):
    for rank in (1, 0):
        _write(tmp_path, 'part', rank, {'rank': rank, 'value': 10 * rank})
    assert [r['value'] for r in d2l.read_rank_results(tmp_path, 'part', 2)] == [0, 10]


def test_read_rank_results_names_missing_ranks(tmp_path):
    _write(tmp_path, 'part', 0, {'rank': 0})
    _write(tmp_path, 'part', 2, {'rank': 2})
    with pytest.raises(ValueError, match=r"no result from rank\(s\) \[1, 3\] of 4"):
        d2l.read_rank_results(tmp_path, 'part', 4)


def test_read_rank_results_rejects_a_file_of_another_rank(tmp_path):
    _write(tmp_path, 'part', 0, {'rank': 0})
    _write(tmp_path, 'part', 1, {'rank': 0})
    with pytest.raises(ValueError, match='rank 1'):
        d2l.read_rank_results(tmp_path, 'part', 2)


def test_read_rank_results_rejects_bad_arguments(tmp_path):
    with pytest.raises(TypeError):
        d2l.read_rank_results(tmp_path, '', 2)
    with pytest.raises(TypeError):
        d2l.read_rank_results(tmp_path, 'part', 2.0)
    with pytest.raises(ValueError):
        d2l.read_rank_results(tmp_path, 'part', 0)


@pytest.mark.parametrize('seconds, error', [(True, TypeError), (float('nan'), ValueError), (-1.0, ValueError)])
def test_bus_bandwidth_rejects_bad_times(seconds, error):
    with pytest.raises(error, match='seconds'):
        d2l.bus_bandwidth(1024, seconds, 2)


def test_ring_allreduce_bytes_names_the_bad_argument():
    with pytest.raises(ValueError, match='n must be >= 1'):
        d2l.ring_allreduce_bytes(1024, 0)
    with pytest.raises(TypeError, match='nbytes must be an int'):
        d2l.ring_allreduce_bytes(1024.0, 2)


def test_the_nccl_expectation_is_the_ring_model_over_the_link():
    """12-nccl-allreduce's expectation: two H200s on NVLink (half the datasheet's 900 GB/s each
    way), two T4s on PCIe 3.0 x16; the bus bandwidth below the link, and the prose quotes it."""
    import pathlib
    from d2l_utils import gpu_models
    from d2l_utils.expectations import expected_for
    bus = {g: {i["name"]: i for i in expected_for("12-nccl-allreduce", gpu_models.DATASHEET[g]).items}["bus_gb_s"]
           for g in ("H200", "T4")}
    assert bus["H200"]["high"] < 450 and bus["T4"]["high"] < gpu_models.pcie_bytes_per_s(3) / 1e9
    assert bus["H200"]["low"] > 10 * bus["T4"]["high"]
    notebook = pathlib.Path(__file__).parent.parent / "notebooks" / "12_collectives_and_sharding.ipynb"
    cell = next(c for c in json.loads(notebook.read_text())["cells"] if c["id"] == "ca7001b-12collectivesandshar")
    prose = " ".join("".join(cell["source"]).split())
    assert f"about {round(bus['H200']['value'], -1):.0f} GB/s" in prose and f"about {bus['T4']['value']:.0f} GB/s" in prose
