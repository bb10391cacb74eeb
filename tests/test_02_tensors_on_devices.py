"""What lesson 2's GPU-only cells are expected to show (d2l_utils/expectations/lesson02.py),
checked against the installed PyTorch where a CPU can check it."""
import mmap
import pathlib

import pytest
import torch

from d2l_utils.expectations import lesson02


def test_printed_on_gpu_adds_the_device_as_torch_prints_it():
    assert lesson02.printed_on_gpu(torch.arange(2.0)) == "tensor([0., 1.], device='cuda:0')"
    assert lesson02.printed_on_gpu(torch.tensor(3), 'cuda:1') == "tensor(3, device='cuda:1')"
    for bad in (torch.ones(2, device='meta'), [1.0]):
        with pytest.raises(TypeError, match="CPU tensor"):
            lesson02.printed_on_gpu(bad)


def _library():
    lib = pathlib.Path(torch.__file__).parent / "lib"
    found = [p for p in lib.glob("*torch_cpu.*") if p.suffix in (".so", ".dylib", ".dll")]
    if not found:
        pytest.skip(f"no libtorch_cpu in {lib}")
    return found[0]


@pytest.mark.parametrize("message", [lesson02.ITERATOR_MESSAGE, lesson02.WRAPPER_211, lesson02.INDEX_MESSAGE],
                         ids=["TensorIterator", "wrapper", "indexing"])
def test_the_quoted_messages_are_the_installed_pytorchs(message):
    """Each message is built from constant pieces in libtorch_cpu (the devices and names are
    filled in): every constant piece must be in the installed binary, as in 2.11 and 2.13."""
    pieces = {
        lesson02.ITERATOR_MESSAGE: ["Expected all tensors to be on the same device, but found at least two devices, "],
        lesson02.WRAPPER_211: ["Expected all tensors to be on the same device, but got ",
                               ", different from other tensors on ", " (when checking argument in method "],
        lesson02.INDEX_MESSAGE: ["indices should be either on ", " or on the same device as the indexed tensor ("],
    }[message]
    assert all(p in message for p in pieces)
    with open(_library(), "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as binary:
        missing = [p for p in pieces if binary.find(p.encode() + b"\0") < 0]
    assert not missing, f"this PyTorch ({torch.__version__}) words it otherwise: {missing}"
