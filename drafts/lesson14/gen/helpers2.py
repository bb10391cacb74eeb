#@save
from d2l_utils import checks


def parallel_plans(width, layers, gpu='H100', gpus=2, tokens=64, micro=4, per_node=8, value_bytes=4):
    """Every way to split a GPT of ``layers`` blocks of ``width`` over ``gpus`` GPUs of the datasheet
    table: tensor parallel ``tp`` (inside a node), pipeline ``pp``, FSDP over the rest (``dp``).

    Per GPU and training step of ``tokens``: lesson 8's 16 bytes a parameter for weights, gradients
    and Adam, sharded tp x pp x dp ways; the activations of the micro-batches 1F1B keeps on the
    first stage, 34 bytes a token per unit of width and block, cut tp ways by sequence parallelism
    (16-bit values, attention's scores not kept: Korthikanti et al., 2022, arXiv:2205.05198);
    tensor parallelism's 4 all-reduces a block of tokens x width values; FSDP's two all-gathers and
    a reduce-scatter of the weights; the bubble; the matrix products. Links: NVLink inside a node
    (PCIe without it), across nodes the PCIe slot of a network card (an upper bound for the
    network). Times by lesson 12's ring model, nothing overlapped. The defaults are lesson 14's
    run: 2 GPUs, 64 tokens of float32 values, 4 micro-batches."""
    from d2l_utils import gpu_models as gm, ring_allreduce_bytes       # bubble_fraction: above
    spec = gm.DATASHEET[gpu]
    width, layers, gpus, tokens, micro, per_node = (checks.integer(v, n, low=1) for v, n in (
        (width, 'width'), (layers, 'layers'), (gpus, 'gpus'), (tokens, 'tokens'), (micro, 'micro'), (per_node, 'per_node')))
    params = layers * (12 * width**2 + 13 * width)              # lesson 8's count of a block
    a = gm.ASSUMPTIONS
    if spec.nvlink_bytes_per_s:                                  # inside a node: NVLink, one way, at NCCL's share
        node = (a['nccl_nvlink_share'][0] * spec.nvlink_bytes_per_s / 2, a['nccl_latency_nvlink_s'][0])
    else:                                                        # or the GPU's own PCIe link
        node = (a['nccl_pcie_share'][0] * gm.pcie_bytes_per_s(*spec.pcie), a['nccl_latency_pcie_s'][0])
    network = (a['nccl_pcie_share'][0] * gm.pcie_bytes_per_s(5, 16), a['nccl_latency_pcie_s'][0])
    dtype = 'bfloat16' if 'bfloat16' in spec.peak_flops else 'float16'
    flops = a['matmul_share'][0] * spec.sustained_flops(dtype)
    plans = []
    for tp in (t for t in (1, 2, 4, 8) if t <= min(per_node, gpus) and gpus % t == 0):
        for pp in (q for q in range(1, layers + 1) if layers % q == 0 and gpus % (tp * q) == 0):
            dp = gpus // (tp * pp)
            dp_rate, dp_latency = node if gpus <= per_node else network
            block_bytes = tokens // dp * width * value_bytes           # one all-reduce of tensor parallelism
            tp_s = 4 * layers // pp * (node[1] + ring_allreduce_bytes(block_bytes, tp) / node[0]) if tp > 1 else 0.0
            weights = value_bytes * params // (tp * pp)                # what FSDP gathers, per rank of a dp group
            dp_s = 3 * (dp_latency + (dp - 1) / dp * weights / dp_rate) if dp > 1 else 0.0
            compute_s = 6 * params * tokens / (gpus * flops)
            bubble = bubble_fraction(pp, micro)
            activations = layers // pp * min(pp, micro) * tokens / (dp * micro) * 34 * width / tp
            memory = 16 * params / gpus + activations
            plans.append({'tp': tp, 'pp': pp, 'dp': dp, 'memory_bytes': memory, 'activation_bytes': activations,
                          'fits': memory <= spec.memory_bytes,
                          'tp_allreduce_bytes': block_bytes if tp > 1 else 0, 'bubble': bubble,
                          'compute_s': compute_s, 'tp_s': tp_s, 'dp_s': dp_s,
                          'step_s': compute_s / (1 - bubble) + tp_s + dp_s})
    return plans
