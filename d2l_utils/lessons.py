# GENERATED FILE, do not edit: it is rebuilt from the #@save cells of
# notebooks/*.ipynb by `python -m d2l_utils.build`, and a test fails when the two
# disagree. Change a helper in the lesson that teaches it, then rebuild.
"""Helpers that the lessons define in their ``#@save`` cells, in lesson order."""

import operator
import torch


__all__ = [
    'num_gpus',
    'try_gpu',
    'try_all_gpus',
    'least_busy_gpus',
]


# ---- from notebooks/01_devices.ipynb ----
def num_gpus():
    """Return the number of accelerators PyTorch can use (CUDA/ROCm, MPS, XPU); 0 if none.

    Defined in notebooks/01_devices.ipynb.
    """
    return torch.accelerator.device_count() if torch.accelerator.is_available() else 0


def _device_index(i):
    """Check that ``i`` is a device index (an int >= 0) and return it.

    Defined in notebooks/01_devices.ipynb.
    """
    if isinstance(i, bool) or not hasattr(type(i), '__index__'):
        raise TypeError(f'a device index must be an int, not {type(i).__name__} {i!r}; '
                        "to name a device use torch.device('cuda:0')")
    i = operator.index(i)
    if i < 0:
        raise ValueError(f'a device index must be >= 0, got {i}')
    return i


# ---- from notebooks/01_devices.ipynb ----
def try_gpu(i=0):
    """Return accelerator ``i`` if it exists, otherwise the CPU (as d2l's ``try_gpu``).

    Defined in notebooks/01_devices.ipynb.
    """
    i = _device_index(i)
    if i < num_gpus():
        return torch.device(torch.accelerator.current_accelerator().type, i)
    return torch.device('cpu')


def try_all_gpus():
    """Return all accelerators, or ``[device('cpu')]`` if there is none (as d2l's).

    Defined in notebooks/01_devices.ipynb.
    """
    return [try_gpu(i) for i in range(num_gpus())] or [torch.device('cpu')]


# ---- from notebooks/01_devices.ipynb ----
def least_busy_gpus(k=1):
    """Return the NVML (PCI bus order) indices of up to ``k`` GPUs with the most free memory.

    Opens no CUDA context, so the answer can still go into CUDA_VISIBLE_DEVICES (with
    CUDA_DEVICE_ORDER=PCI_BUS_ID). Returns [] when NVML or an NVIDIA driver is missing.

    Defined in notebooks/01_devices.ipynb.
    """
    k = _device_index(k)
    if k == 0:
        raise ValueError('ask for at least one GPU (k >= 1)')
    try:
        import pynvml
        pynvml.nvmlInit()
    except ImportError:
        return []            # nvidia-ml-py is not installed
    except pynvml.NVMLError:
        return []            # no NVIDIA driver (or no NVIDIA GPU)
    try:
        free = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            free.append((pynvml.nvmlDeviceGetMemoryInfo(handle).free, -i))
    finally:
        pynvml.nvmlShutdown()
    return [-neg_i for _, neg_i in sorted(free, reverse=True)[:k]]
