"""Unit tests of the helper of lesson 6 (notebooks/06_data_parallel.ipynb)."""
import pytest
import torch

import d2l_utils as d2l

CPU = torch.device('cpu')


def test_split_batch_gives_one_chunk_per_device_in_order():
    X, y = torch.arange(32.).reshape(16, 2), torch.arange(16)
    Xs, ys = d2l.split_batch(X, y, [CPU] * 4)
    assert [len(x) for x in Xs] == [4, 4, 4, 4] and [len(t) for t in ys] == [4, 4, 4, 4]
    assert torch.equal(torch.cat(Xs), X) and torch.equal(torch.cat(ys), y)
    assert all(x.device == CPU for x in Xs + ys)


def test_split_batch_accepts_device_names_and_tuples():
    Xs, ys = d2l.split_batch(torch.zeros(6, 3), torch.zeros(6), ('cpu', 'cpu'))
    assert [x.shape for x in Xs] == [torch.Size([3, 3])] * 2
    assert all(t.device == CPU for t in ys)


@pytest.mark.parametrize('n, sizes', [(10, [3, 3, 3, 1]), (3, [1, 1, 1]), (1, [1])])
def test_split_batch_follows_the_chunk_rule_of_scatter(n, sizes):
    Xs, ys = d2l.split_batch(torch.zeros(n, 2), torch.zeros(n), [CPU] * 4)
    assert [len(x) for x in Xs] == sizes == [len(t) for t in ys]


def test_split_batch_keeps_autograd_history():
    X = torch.randn(4, 2, requires_grad=True)
    Xs, _ = d2l.split_batch(X, torch.zeros(4), [CPU, CPU])
    sum(x.sum() for x in Xs).backward()
    assert torch.equal(X.grad, torch.ones(4, 2))


@pytest.mark.parametrize('X, y, devices, error, message', [
    ([1, 2], torch.zeros(2), [CPU], TypeError, 'must be a tensor'),
    (torch.zeros(2), None, [CPU], TypeError, 'must be a tensor'),
    (torch.zeros(2), torch.zeros(2), 'cpu', TypeError, 'list of devices'),
    (torch.zeros(2), torch.zeros(2), CPU, TypeError, 'list of devices'),
    (torch.zeros(2), torch.zeros(2), [0, 1], TypeError, 'must be a str or torch.device'),
    (torch.zeros(2), torch.zeros(2), [], ValueError, 'at least one device'),
    (torch.zeros(2), torch.zeros(2), ['nonsense'], ValueError, 'not a device'),
    (torch.zeros(2), torch.zeros(2), ['cpu', 'cuda:99'], ValueError, 'not present'),
    (torch.zeros(3, 2), torch.zeros(2), [CPU], ValueError, 'same number'),
    (torch.zeros(0, 2), torch.zeros(0), [CPU], ValueError, 'same number'),
    (torch.tensor(1.), torch.tensor(1.), [CPU], ValueError, 'same number'),
])
def test_split_batch_rejects_bad_input(X, y, devices, error, message):
    with pytest.raises(error, match=message):
        d2l.split_batch(X, y, devices)


# ---- the lesson itself (notebooks/06_data_parallel.ipynb) ----
import ast  # noqa: E402
import threading  # noqa: E402
import types  # noqa: E402

from conftest import ROOT, code_cells, source  # noqa: E402

from d2l_utils.recordings import MARK  # noqa: E402

LESSON = ROOT / 'notebooks' / '06_data_parallel.ipynb'


def lesson_function(name):
    """Execute the lesson's cell that defines ``name`` and return the function."""
    cell = next(c for c in code_cells(LESSON) if f'def {name}(' in source(c))
    namespace = {'torch': torch, 'threading': threading}
    exec(source(cell), namespace)
    return namespace[name]


class Recorder:
    """A stand-in replica that notes the thread it was called from."""

    def __init__(self):
        self.thread = None

    def __call__(self, x):
        self.thread = threading.current_thread()      # kept alive, so never reused
        return x


def test_lesson_parallel_apply_uses_one_thread_per_replica_on_the_cpu():
    parallel_apply = lesson_function('parallel_apply')
    replicas, inputs = [Recorder() for _ in range(4)], [torch.full((2,), float(i)) for i in range(4)]
    assert all(o is x for o, x in zip(parallel_apply(replicas, inputs), inputs, strict=True))
    threads = {r.thread for r in replicas}
    assert len(threads) == 4 and threading.current_thread() not in threads


def test_lesson_parallel_apply_never_drives_mps_from_several_threads():
    """PyTorch's MPS backend has crashed when used from threads at once (pytorch#197805)."""
    parallel_apply = lesson_function('parallel_apply')
    replicas = [Recorder() for _ in range(4)]
    inputs = [types.SimpleNamespace(device=torch.device('mps'), i=i) for i in range(4)]
    assert parallel_apply(replicas, inputs) == inputs
    assert {r.thread for r in replicas} == {threading.current_thread()}


def test_lesson_parallel_apply_hands_an_error_back_to_the_caller():
    parallel_apply = lesson_function('parallel_apply')

    def broken(x):
        raise ValueError('replica failed')
    with pytest.raises(ValueError, match='replica failed'):
        parallel_apply([Recorder(), broken], [torch.zeros(1), torch.zeros(1)])


def compared_cells():
    return [c for c in code_cells(LESSON) if 'NBVAL_IGNORE_OUTPUT' not in source(c)]


def test_compared_cells_give_data_parallel_exactly_one_device():
    """Given all GPUs, DataParallel warns on stderr where their models differ (_check_balance)."""
    calls = 0
    for cell in compared_cells():
        code = '\n'.join(l.split('%')[0] + 'pass' if l.lstrip().startswith('%') else l
                         for l in source(cell).splitlines())             # IPython magics
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Call) and getattr(node.func, 'attr', None) == 'DataParallel':
                calls += 1
                ids = [k.value for k in node.keywords if k.arg == 'device_ids']
                assert ids and isinstance(ids[0], ast.List) and len(ids[0].elts) == 1, ast.unparse(node)
    assert calls >= 2


@pytest.mark.parametrize('cell_id, gpus', [('06-library-functions', 1), ('06-real-split', 2),
                                           ('06-params-on-first-device', 1), ('06-first-gpu-load', 2),
                                           ('06-library-replicate', 1)])
def test_gpu_only_cells_ask_for_the_gpus_they_use(cell_id, gpus):
    cell = next(c for c in code_cells(LESSON) if (cell_id, str(gpus)) in MARK.findall(source(c)))
    condition = source(cell).splitlines()[1]
    expected = 'torch.cuda.is_available()' if gpus == 1 else f'torch.cuda.device_count() >= {gpus}'
    assert condition == f'if {expected}:'


# ---- what the GPU-only cells are expected to show (d2l_utils/expectations/lesson06.py) ----
from d2l_utils import gpu_models  # noqa: E402
from d2l_utils.expectations import lesson06  # noqa: E402


def test_the_memory_model_counts_each_gpus_peak():
    gpu0, gpu1 = lesson06.step_peaks()
    assert gpu0 == 84                                   # 2 + 2 + 5 x 16 MiB
    assert gpu1 == pytest.approx(50.02, abs=0.01)       # 20.02 + 2 + 2 + 8 + 2 + 16 MiB
    workspace = gpu_models.cublas_workspace_bytes(gpu_models.DATASHEET['H200']) / 2**20
    assert gpu0 > gpu1 + workspace                       # even with a new workspace on GPU 1
    with pytest.raises(ValueError, match='even'):
        lesson06.step_peaks(rows=1023)


def test_squares_backward_holds_five_tensors_of_the_outputs_size():
    """The model's count for GPU 0, checked with PyTorch's own autograd on this CPU: the output
    (saved by square), mean's gradient, and pow_backward's out.pow(1), 2 * it and the product."""
    w, x = torch.randn(64, 64, requires_grad=True), torch.randn(64, 64)

    def step():
        out = (x @ w).repeat(1, 4)                      # 64 x 256, not a leaf, like the gathered output
        out.square().mean().backward()
    assert d2l.peak_memory(step) == pytest.approx(5 * 64 * 256 * 4, rel=1e-3)


def test_the_teachers_page_quotes_the_expected_memory():
    text = ' '.join((ROOT / 'teaching' / '06_data_parallel.md').read_text(encoding='utf-8').split())
    gpu0, gpu1 = lesson06.step_peaks()
    assert f'GPU 0 {gpu0:.0f} MiB' in text and f'GPU 1 {gpu1:.0f} MiB' in text
