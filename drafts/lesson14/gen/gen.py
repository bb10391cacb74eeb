import json, sys
sys.path.insert(0, '/work/main/tools')
from nbtemplate import write_lesson, md, code, solution
P = json.load(open('/tmp/p14/gen/parts.json'))
H1 = open('/tmp/p14/gen/helpers1.py').read().strip()
H2 = open('/tmp/p14/gen/helpers2.py').read().strip()
G = 'https://github.com/d2l-gpu/gpu-course/blob/main/GLOSSARY.md#'

def tag(cell, *tags):
    cell.metadata['tags'] = list(tags)
    return cell

cells = []
A = cells.append
A(md(f"""# 14. Beyond data parallelism

**What you will learn.** Three more ways to split training over GPUs, each run on CPU [ranks]({G}rank) and
checked against one process. *Tensor parallelism* cuts each weight matrix between the ranks and
adds one [all-reduce]({G}all-reduce) per block; *sequence parallelism* also cuts the positions
outside the matrix products, turning that all-reduce into a reduce-scatter and an all-gather;
*pipeline parallelism* cuts the model into stages, whose idle time, the *bubble*, follows
`(p - 1) / (m + p - 1)`. Then which link each can afford, and a calculator of the combinations.

**What you need.** A CPU is enough: two processes talk with `gloo`, started once by `torchrun` with
lesson 7's helpers, as in lesson 12. The times of these splits on GPUs come from the course's models."""))
A(code("""import json, math, os, runpy, tempfile, time
import matplotlib.pyplot as plt
plt.style.use('d2l_utils.course')          # figure text at 12 pt, readable on a slide
import torch
from torch import nn
import d2l_utils as d2l

scratch = tempfile.TemporaryDirectory()
home = os.getcwd()
os.chdir(scratch.name)"""))
A(md("""## Three ways to split a model

Data parallelism (lessons 7 and 12) splits the *batch*: every rank computes the whole model. When
the model's matrices or its activations do not fit, we split the model itself:

| split | each rank holds | each rank sends, per step |
|---|---|---|
| tensor parallel | a slice of every weight matrix | an all-reduce of the activations, per block, forward and backward |
| sequence parallel | also a slice of the positions | a reduce-scatter and an all-gather instead |
| pipeline parallel | whole layers, a *stage* | activations to the next stage, gradients back |"""))
A(md("""### The script and its models

One script, `parallel.py`, does the lesson's distributed work and is launched once. Its models are
lesson 8's transformer pieces at a small width `D = 32`: an MLP, attention (its fused `qkv` as three
layers, so that heads split cleanly), and a block of layer norm, MLP and dropout with a residual:"""))
A(tag(code("%%writefile parallel.py\n" + P['head_a']), 'slide-notes'))
A(tag(code("%%writefile -a parallel.py\n\n\n" + P['head_b']), 'slide-notes'))
A(md(f"""Every [collective]({G}collective) is counted: PyTorch's `CommDebugMode` sees each one that DTensor or
`torch.distributed` calls; our subclass also notes its kind and the bytes of the whole tensor
(the gathered output, the input to reduce), as lesson 12 counted [FSDP]({G}fsdp)'s:"""))
A(tag(code("%%writefile -a parallel.py\n\n\n" + P['collectives']), 'slide-notes'))
A(md(f"""## Tensor parallelism: a slice of every matrix

An MLP is two matrix products. Cut the first weight by its *columns* (outputs): each rank computes
half of the hidden units. Cut the second by its *rows* (inputs): each rank gets a *partial* output,
and one all-reduce adds the two. **One all-reduce per block in the forward, one in the backward**,
of `batch × positions × D` values. `parallelize_module` takes a plan of `ColwiseParallel` and
`RowwiseParallel` and turns the weights into DTensors, lesson 12's sharded tensors ([`parallelize_module`'s documentation](https://docs.pytorch.org/docs/stable/distributed.tensor.parallel.html)):"""))
A(tag(code("%%writefile -a parallel.py\n\n\n" + P['tp']), 'slide-notes'))
A(md("""## Sequence parallelism: a slice of the positions

Between tensor-parallel blocks every rank holds the whole activation, and layer norm and dropout
repeat the same work on every rank. *Sequence parallelism* gives each rank half of the positions
there: an all-gather before the column-cut layer, a reduce-scatter after the row-cut one. **The
all-reduce becomes a reduce-scatter plus an all-gather**, the same bytes (lesson 12). The script
marks those layers `SequenceParallel` and counts what autograd keeps for the backward:"""))
A(tag(code("%%writefile -a parallel.py\n\n\n" + P['sp']), 'slide-notes'))
A(md("""## Pipeline parallelism: a stage per rank

Cut the stack of blocks in `p` *stages*, one per rank: stage 0 runs the first blocks and sends its
output to stage 1. Alone, stage 1 would wait while stage 0 works. So the batch is cut into `m`
*micro-batches* that follow each other through the stages. Two schedules of
`torch.distributed.pipelining`: **GPipe** runs every forward, then every backward; **1F1B**, once the
pipe is full, alternates one forward and one backward. The script notes, on each rank, the order in
which its stage ran them (the stage's `forward_one_chunk` and `backward_one_chunk`), with `m` from 2 to 16:"""))
A(tag(code("%%writefile -a parallel.py\n\n\n" + P['pp']), 'slide-notes'))
A(md("""## One launch for every part

`d2l.torchrun` (lesson 7) starts two processes and waits; it leaves none behind, also after an
interrupt or a restart of the notebook."""))
A(code("%%writefile -a parallel.py\n\n\n" + P['main']))
A(code("""# NBVAL_IGNORE_OUTPUT
# The time depends on the machine.
os.makedirs('out')
start = time.perf_counter()
run = d2l.torchrun('parallel.py', 2, 'out', timeout=240)
print(f'2 processes, exit code {run.returncode}, {time.perf_counter() - start:.1f} s')
assert run.returncode == 0, run.stderr[-3000:]"""))
A(md("""## Tensor parallelism, counted

Each rank holds half of every weight matrix: the first layer's rows (its outputs), the second
layer's columns (its inputs). The second bias is whole: it is added once, after the all-reduce:"""))
A(code("""tp = d2l.read_rank_results('out', 'tp', 2)
for name, shape in tp[0]['mlp']['global'].items():
    print(f"{name:12} {str(shape):9} -> rank 0 {tp[0]['mlp']['local'][name]}, rank 1 {tp[1]['mlp']['local'][name]}")
for r in tp:
    held = {n: math.prod(s) for n, s in r['mlp']['local'].items()}
    whole = {n: math.prod(s) for n, s in r['mlp']['global'].items()}
    assert all(2 * held[n] == whole[n] for n in held if n != 'down.bias') and held['down.bias'] == whole['down.bias']"""))
A(md("""The collectives, against the model: one all-reduce each way, of the activation, `4 × 16 × 32`
float32 values. Data parallelism would all-reduce the gradients instead, as many values as the MLP has
parameters:"""))
A(code("""activation = 4 * 16 * 32 * 4                        # B x T x D float32 values, bytes
params = sum(math.prod(s) for s in tp[0]['mlp']['global'].values())
for r in tp:
    for way in ('forward', 'backward'):
        print(f"rank {r['rank']}, {way:8}: {[(kind, nbytes) for kind, nbytes, _ in r['mlp'][way]]}")
        assert [(kind, nbytes) for kind, nbytes, _ in r['mlp'][way]] == [('all-reduce', activation)]
print(f'model: 1 all-reduce of {activation} bytes each way; DDP would all-reduce {4 * params} bytes of gradients')
print(f'each rank sends, by the ring model: {d2l.ring_allreduce_bytes(activation, 2):.0f} bytes each way')"""))
A(md("""**Tensor parallelism sends activations, data parallelism gradients**: its bytes grow with the
tokens of a step, not with the parameters, and it sends them in the middle of every block, where
nothing else can run. Is the result that of one process? The script's models and input, in this
process, against the ranks' outputs and gradients (gathered from the slices), within float32's
rounding: the all-reduce adds in another order (lesson 12):"""))
A(code("""script = runpy.run_path('parallel.py')                  # its functions, not its main part
for what, args in (('mlp', (script['MLP'], 32)), ('attention', (script['Attention'], 32, 4))):
    model, x = script['made'](*args), script['inputs']()
    y = model(x)
    y.pow(2).mean().backward()
    for r in tp:
        assert torch.allclose(torch.tensor(r[what]['out']), y.detach().flatten(), rtol=1e-5, atol=1e-6)
        assert torch.allclose(torch.tensor(r[what]['x_grad']), x.grad.flatten(), rtol=1e-5, atol=1e-6)
        for name, p in model.named_parameters():
            assert torch.allclose(torch.tensor(r[what]['grads'][name]), p.grad.flatten(), rtol=1e-5, atol=1e-6), name
    print(f'{what}: output, input gradient and every weight gradient of one process, both ranks')"""))
A(md("""Attention split by heads: each rank holds 2 of the 4 heads, half of `q`, `k` and `v` by rows
and half of `proj` by columns. Its forward needs one all-reduce, like the MLP; its
backward, as planned, three: each of `q`, `k` and `v` all-reduces its own part of the input's
gradient. Making the input a DTensor once, before the three layers, sums the parts first, and one
all-reduce remains ([three all-reduces or one](#Three-all-reduces-or-one)):"""))
A(code("""att, one = tp[0]['attention'], d2l.read_rank_results('out', 'attention1', 2)
print('attention, rank 0 holds', {n: s for n, s in att['local'].items() if n.endswith('weight')})
print(f"forward {len(att['forward'])} all-reduce; backward {len(att['backward'])} as planned, "
      f"{len(one[0]['backward'])} with the input made a DTensor once")
assert [len(att['forward']), len(att['backward']), len(one[0]['backward'])] == [1, 3, 1]
assert all(torch.allclose(torch.tensor(r['x_grad']), torch.tensor(att['x_grad']), rtol=1e-5, atol=1e-6) for r in one)"""))
A(md("""## Sequence parallelism, counted

The block with tensor parallelism alone, then with the positions split too. Expect the
all-reduce replaced by an all-gather and a reduce-scatter of the same whole tensor, in each
direction:"""))
A(code("""sp = d2l.read_rank_results('out', 'sp', 2)
for how in ('tp', 'tp+sp'):
    calls = {way: [(kind, nbytes) for kind, nbytes, _ in sp[0][how][way]] for way in ('forward', 'backward')}
    print(f'{how:6} forward {calls["forward"]}, backward {calls["backward"]}')
assert [c[:2] for c in sp[0]['tp']['forward']] == [['all-reduce', activation]]
assert [c[:2] for c in sp[0]['tp+sp']['forward']] == [['all-gather', activation], ['reduce-scatter', activation]]
sent = 2 * (activation / 2)                             # each ring step sends half; one step each
assert d2l.ring_allreduce_bytes(activation, 2) == sent  # the same bytes as the all-reduce"""))
A(md("""The activations each rank keeps for the backward, tensor by tensor (parameters left out).
Layer norm's input and statistics and dropout's mask (float32 on a CPU) are per position, so split
in two; the matrix products' inputs are whole or already cut by tensor parallelism:"""))
A(code("""kept = {how: sp[0][how]['activations'] for how in ('tp', 'tp+sp')}
for a, b in zip(kept['tp'], kept['tp+sp']):
    print(f'{str(a[0]):12} {a[2]:6} bytes -> {str(b[0]):12} {b[2]:6}')
total = {how: sum(b for *_, b in kept[how]) for how in kept}
per_position = sum(a[2] for a, b in zip(kept['tp'], kept['tp+sp']) if a[2] != b[2])
print(f"per rank: {total['tp']} bytes with tensor parallelism, {total['tp+sp']} with the sequence split too")
assert total['tp'] - total['tp+sp'] == per_position // 2"""))
A(md("""**The sequence split halves what layer norm and dropout keep**; here DTensor keeps the gathered
input of the first matrix product whole, which Megatron-LM's version gathers again in the backward
instead (`LinearWithGradAccumulationAndAsyncCommunication` in `megatron/core/tensor_parallel/layers.py`). Both ranks' outputs (dropout off) and gradients against one process:"""))
A(code("""model, x = script['made'](script['Block'], 32, 0.1), script['inputs']()
model.eval()
y = model(x)
(y.pow(2).sum() / y.numel()).backward()
for r in sp:
    for how in ('tp', 'tp+sp'):
        mine = y.detach().chunk(2, dim=1)[r['rank']] if how == 'tp+sp' else y.detach()
        assert torch.allclose(torch.tensor(r[how]['out']), mine.flatten(), rtol=1e-5, atol=1e-6)
        for name, p in model.named_parameters():
            assert torch.allclose(torch.tensor(r[how]['grads'][name]), p.grad.flatten(), rtol=1e-5, atol=1e-6), (how, name)
print(f"both ranks, both ways: one process's output and gradients; rank 0's output {sp[0]['tp+sp']['out_shape']}")"""))
A(md("""## The pipeline bubble

Each rank noted the order in which its stage ran its forwards (`F`) and backwards (`B`). We replay
those orders, a forward taking one unit of time and a backward two (a backward computes two
products per forward one), each waiting for what it needs from its neighbour. The idle share of
the replay is the *bubble*; its model, `(p - 1) / (m + p - 1)` (with the times the ranks measured:
[the bubble from measured times](#The-bubble-from-measured-times)):"""))
A(code(H1))
A(code("""pp = d2l.read_rank_results('out', 'pp', 2)
for run in pp[0]:
    if run == 'rank':
        continue
    _, bubble, _ = replay_pipeline([[a[:2] for a in r[run]['order']] for r in pp])
    m = int(run.split('=')[1])
    print(f'{run:10}: stage 0 ran {"".join(a[0] for a in pp[0][run]["order"]):32} bubble {bubble:.3f}, model {bubble_fraction(2, m):.3f}')
    assert math.isclose(bubble, bubble_fraction(2, m), rel_tol=1e-9)"""))
A(md("""**The bubble shrinks as `(p - 1) / (m + p - 1)`**: with 16 micro-batches two stages idle 6% of
the time, with 2 a third. GPipe and 1F1B leave the same bubble; they differ in memory. The timeline of
`m = 4` (forwards light, backwards dark):"""))
A(code("""def draw_pipeline(ax, spans, title):
    \"\"\"A pipeline's replayed timeline: a row per stage, a box per forward (light) or backward (dark).\"\"\"
    for s, stage in enumerate(spans):
        for kind, i, start, end in stage:
            ax.barh(s, end - start, left=start, color=plt.cm.tab10(i), alpha=0.45 if kind == 'F' else 1, edgecolor='white')
            ax.text((start + end) / 2, s, f'{kind}{i}', ha='center', va='center')
    ax.set(yticks=range(len(spans)), yticklabels=[f'stage {s}' for s in range(len(spans))], xlabel='time (forward = 1)', title=title)
    ax.invert_yaxis()

fig, axes = plt.subplots(1, 2, figsize=(11, 2.6), layout='constrained')
for ax, run in zip(axes, ('GPipe m=4', '1F1B m=4')):
    total, bubble, spans = replay_pipeline([[a[:2] for a in r[run]['order']] for r in pp])
    draw_pipeline(ax, spans, f'{run}: {total:.0f} units, bubble {bubble:.0%}')
plt.show()"""))
A(md("""What each schedule keeps: a stage keeps a micro-batch's activations from its forward to its
backward. GPipe keeps all `m`; 1F1B at most `p - s` on stage `s`, whatever `m`. Counted from the
orders the ranks ran, with the bytes of one micro-batch by lesson 8's `saved_tensor_bytes`:"""))
A(code("""def in_flight(order):
    \"\"\"The most micro-batches whose forward ran and whose backward has not.\"\"\"
    held = most = 0
    for kind, *_ in order:
        held += 1 if kind == 'F' else -1
        most = max(most, held)
    return most

stage0, x = script['stack']()[:2], torch.randn(1, 16, 32)       # stage 0, and a micro-batch of m = 16
one = d2l.saved_tensor_bytes(lambda: stage0(x), exclude=[*stage0.parameters(), x])   # lesson 8's count
for run in ('GPipe m=16', '1F1B m=16'):
    held = [in_flight(r[run]['order']) for r in pp]
    print(f'{run}: stage 0 keeps up to {held[0]} micro-batches ({held[0] * one} bytes), stage 1 {held[1]}')
assert [in_flight(r['GPipe m=16']['order']) for r in pp] == [16, 16]
assert [in_flight(r['1F1B m=16']['order']) for r in pp] == [2, 1]"""))
A(md("""And the result: the last stage's losses are those of one process on each micro-batch, and
each stage's gradients, averaged over the micro-batches, are one process's on the whole batch:"""))
A(code("""model = script['stack']()
X = torch.randn(16, 16, 32, generator=torch.Generator().manual_seed(1))
Y = torch.randn(16, 16, 32, generator=torch.Generator().manual_seed(2))
nn.functional.mse_loss(model(X), Y).backward()
grads = {name: p.grad.flatten() for name, p in model.named_parameters()}
for run in pp[1]:
    if run != 'rank':
        m = int(run.split('=')[1])
        ones = [nn.functional.mse_loss(model(x), y).item() for x, y in zip(X.chunk(m), Y.chunk(m))]
        assert torch.allclose(torch.tensor(pp[1][run]['losses']), torch.tensor(ones), rtol=1e-5)
        for r in pp:
            for name, g in r[run]['grads'].items():
                assert torch.allclose(torch.tensor(g), grads[name], rtol=1e-4, atol=1e-6), (run, name)
print(f'every schedule and m: the losses and the gradients of one process ({len(grads)} tensors)')"""))
A(md(f"""## Putting them together

Large jobs combine the three. A *2-D mesh* arranges the GPUs in a grid: tensor parallelism along
one side, inside a node, and FSDP along the other, across nodes ([running a 2-D mesh](#Running-a-2-D-mesh)
on four ranks). Which split goes on which link follows from the bytes: tensor parallelism sends
activations four times a block, between its matrix products, so it needs
[NVLink]({G}nvlink); FSDP sends each weight three times a step and [overlaps]({G}overlap) it with the compute, so it tolerates the
network. By lesson 12's ring model, for one block of a GPT of width 8192, 8 sequences of 4096
tokens in [bfloat16]({G}bfloat16), tensor parallel over the 8 H100s of a node (FSDP's share: its slice of the weights):"""))
A(code("""from d2l_utils import gpu_models as gm
h100 = gm.DATASHEET['H100']
links = {'NVLink': gm.ASSUMPTIONS['nccl_nvlink_share'][0] * h100.nvlink_bytes_per_s / 2,
         'network (at most PCIe 5.0 x16)': gm.ASSUMPTIONS['nccl_pcie_share'][0] * gm.pcie_bytes_per_s(5, 16)}
act, weights = 8 * 4096 * 8192 * 2, 2 * (12 * 8192**2 + 13 * 8192)     # bytes: one activation, one block's weights
flops = 6 * (12 * 8192**2) * 8 * 4096 / 8                             # the block's matrix products, per GPU of 8
compute = flops / (gm.ASSUMPTIONS['matmul_share'][0] * h100.sustained_flops('bfloat16'))
cost = {name: (4 * d2l.ring_allreduce_bytes(act, 8) / rate, 3 * weights / 8 / rate) for name, rate in links.items()}
for name, (tp_s, fsdp_s) in cost.items():
    print(f'{name:31}: tensor parallel {tp_s * 1e3:5.1f} ms, FSDP {fsdp_s * 1e3:5.1f} ms; compute {compute * 1e3:.1f} ms')
nvlink, network = cost.values()
assert nvlink[0] < compute < network[0] and network[1] < compute"""))
A(md("""**Tensor parallelism inside a node, FSDP and pipelines across**: over the network, tensor
parallelism's all-reduces would take longer than the block's compute, and nothing hides them.
The calculator below counts, for a GPT, a GPU and a number of GPUs, every combination: memory per
GPU, bytes, bubble and the expected time of a step. Its defaults are this lesson's run:"""))
A(code(H2))
A(code("""plans = {(p['tp'], p['pp']): p for p in parallel_plans(32, 4)}
counted = sum(nbytes for way in ('forward', 'backward') for _, nbytes, _ in tp[0]['mlp'][way])
assert 2 * plans[2, 1]['tp_allreduce_bytes'] == counted                        # an MLP's two, counted above
assert math.isclose(plans[1, 2]['bubble'], replay_pipeline([[a[:2] for a in r['GPipe m=4']['order']] for r in pp])[1])
print(f"defaults: all-reduce of {plans[2, 1]['tp_allreduce_bytes']} bytes (counted: {counted // 2}), "
      f"bubble {plans[1, 2]['bubble']:.2f} (replayed, m=4)")
for width, layers, gpus in ((5120, 40, 8), (8192, 80, 64)):
    plans = parallel_plans(width, layers, 'H100', gpus, tokens=2**20, micro=16, value_bytes=2)
    fit = sorted((p for p in plans if p['fits']), key=lambda p: p['step_s'])
    print(f'width {width}, {layers} blocks, 2^20 tokens a step, {gpus} H100s: {len(fit)} of {len(plans)} ways fit; the fastest:')
    for p in fit[:3]:
        print(f"  tp {p['tp']} pp {p['pp']:2} dp {p['dp']:2}: {p['memory_bytes'] / 2**30:4.1f} GiB a GPU, step {p['step_s']:5.2f} s "
              f"= compute {p['compute_s']:.2f} / (1 - bubble {p['bubble']:.2f}) + tp {p['tp_s']:.2f} + FSDP {p['dp_s']:.2f}")"""))
A(md("""## Summary

* Tensor parallelism: a slice of each matrix; an all-reduce per block each way.
* Sequence parallelism: reduce-scatter plus all-gather; per-position activations halved.
* Pipelines: a bubble of `(p - 1) / (m + p - 1)`; 1F1B keeps `p - s` micro-batches, GPipe `m`.
* Tensor parallelism inside a node, FSDP and pipelines across.
* Every split gave one process's losses and gradients, up to rounding."""))
A(md("""## Exercises

1. **An uneven pipeline**. The last stage also computes the loss; suppose it made stage 1 take
   1.5 times as long as stage 0, forward and backward. *Predict* the bubble of GPipe with `m = 8`:
   the slow stage sets the pace, and the fast one waits. *Measure* it with `replay_pipeline`, giving
   each action of the recorded orders its time. *Explain* which model to use for unequal stages.
2. **Tensor or data parallel bytes**. *Predict*, with `d2l.ring_allreduce_bytes`, the bytes each
   of two ranks sends per training step for the MLP, with tensor parallelism (the activations,
   forward and backward) and with data parallelism (one all-reduce of float32 gradients). *Measure*
   the first from the counted calls of part 1. *Explain* at how many tokens per step the two are
   equal, and which grows with a larger model."""))
A(solution("""# Prediction: stage 0 takes 1 + 2 units a micro-batch, stage 1 1.5 + 3; the pipe runs at stage 1's pace.
m, slow = 8, 1.5
predicted_total = 1 + m * 3 * slow + 2                    # stage 0's first forward, stage 1's work, stage 0's last backward
predicted = 1 - m * (3 + 3 * slow) / (2 * predicted_total)
print(f'predicted: step {predicted_total} units, bubble {predicted:.3f} (the equal-stage model says {bubble_fraction(2, m):.3f})')
orders = [[(k, i, (1 if k == 'F' else 2) * (slow if s == 1 else 1)) for k, i, _ in r[f'GPipe m={m}']['order']] for s, r in enumerate(pp)]
total, bubble, _ = replay_pipeline(orders)
print(f'measured by the replay: step {total} units, bubble {bubble:.3f}')
# The fast stage waits a third of its time for the slow one, on top of the fill and drain: the bubble
# of unequal stages is set by the slowest one, and the model (p - 1) / (m + p - 1) holds only for
# stages of equal time. Balance the stages (fewer blocks on the stage that computes the loss).
assert math.isclose(total, predicted_total) and math.isclose(bubble, predicted)""", "Solution 1"))
A(solution("""# Prediction: tensor parallel, 2 all-reduces of the activation; data parallel, 1 of the gradients.
predicted_tp = 2 * d2l.ring_allreduce_bytes(activation, 2)
predicted_dp = d2l.ring_allreduce_bytes(4 * params, 2)
print(f'predicted per rank and step: tensor parallel {predicted_tp:.0f} bytes, data parallel {predicted_dp:.0f}')
measured_tp = sum(d2l.ring_allreduce_bytes(nbytes, 2) for way in ('forward', 'backward') for _, nbytes, _ in tp[0]['mlp'][way])
print(f'measured (counted calls, ring model): tensor parallel {measured_tp:.0f} bytes')
tokens = 4 * 16
equal = tokens * predicted_dp / predicted_tp
print(f'equal at {equal:.1f} tokens a step; the data-parallel bytes grow with D^2, the tensor-parallel ones with D')
# Tensor parallelism sends 2 x tokens x D values a block, data parallelism the MLP's 8 D^2 + 5 D
# weights once a step: equal at 4 D + 2.5 tokens (130.5 here). A real step has millions of tokens, so
# tensor parallelism sends far more, and in the middle of the compute: it needs NVLink.
assert measured_tp == predicted_tp and math.isclose(equal, 4 * 32 + 2.5)""", "Solution 2"))
depth = tag(md("""## Going deeper

What follows is optional: the machinery behind the lesson's results.

- [Three all-reduces or one](#Three-all-reduces-or-one)
- [Running a 2-D mesh](#Running-a-2-D-mesh)
- [The bubble from measured times](#The-bubble-from-measured-times)"""), 'depth')
A(depth)
A(md("""## Three all-reduces or one

With `ColwiseParallel` on `q`, `k` and `v`, each layer turns the plain input into a DTensor of its
own (`_prepare_input_fn` in `torch/distributed/tensor/parallel/style.py`), and the backward of each
turns its partial gradient into a whole one: three all-reduces. `PrepareModuleInput` on the
attention module makes the input a DTensor once; the three partial gradients are added as
DTensors, still partial, and one all-reduce remains, of the same tensor. Megatron-LM's attention
does the same with one fused `qkv` layer, whose output columns it orders head by head
(`megatron/core/transformer/attention.py`)."""))
A(md("""## Running a 2-D mesh

A second script, for four ranks: a 2 x 2 mesh, `'tp'` inside pairs of ranks, `'dp'` across them.
Each block's MLP is tensor parallel on `mesh['tp']`, then sharded by FSDP on `mesh['dp']`; each pair
takes half of the batch. It also runs the pipeline on four stages:"""))
A(code("%%writefile mesh2d.py\n" + '''"""Lesson 14's depth, on 4 ranks: tensor parallel inside pairs, FSDP across; pipelines of 4 stages."""
from parallel import *          # the lesson's script: save, stack, Collectives, pipeline, ...


''' + P['mesh2d'] + '''


if __name__ == '__main__':
    dist.init_process_group('gloo')
    two_dimensional()
    pipeline(micro=(4, 8, 16), part='pp4')
    gc.collect()
    dist.destroy_process_group()'''))
A(code("""# NBVAL_IGNORE_OUTPUT
# The time depends on the machine.
start = time.perf_counter()
run = d2l.torchrun('mesh2d.py', 4, 'out', timeout=240)
print(f'4 processes, exit code {run.returncode}, {time.perf_counter() - start:.1f} s')
assert run.returncode == 0, run.stderr[-3000:]"""))
A(md("""Each rank holds a quarter of each MLP weight (half by tensor parallelism, half of that by FSDP).
The collectives of one step: tensor parallelism's all-reduces of activations on `'tp'`, FSDP's
all-gathers and reduce-scatters of the tensor-parallel slices on `'dp'`:"""))
A(code("""mesh = d2l.read_rank_results('out', 'mesh2d', 4)
print('rank 0 holds', {n: s for n, s in mesh[0]['local'].items() if n.startswith('0.')})
for dim in ('tp', 'dp'):
    print(dim, [(kind, nbytes) for kind, nbytes, d in mesh[0]['calls'] if d == dim])
assert all(math.prod(s) * 4 == math.prod(p.shape) for (n, s), p in zip(mesh[0]['local'].items(), script['stack'](2).parameters())
           if n.endswith('mlp.up.weight') or n.endswith('mlp.down.weight'))
assert [k for k, _, d in mesh[0]['calls'] if d == 'tp'] == ['all-reduce'] * 4
assert sorted(k for k, _, d in mesh[0]['calls'] if d == 'dp') == ['all-gather'] * 4 + ['reduce-scatter'] * 2"""))
A(md("""The gradients, gathered, against one process on the whole batch; and the bubble of four stages,
replayed:"""))
A(code("""model = script['stack'](2)
X = torch.randn(8, 16, 32, generator=torch.Generator().manual_seed(1))
nn.functional.mse_loss(model(X), torch.zeros(8, 16, 32)).backward()
for r in mesh:
    for name, p in model.named_parameters():
        assert torch.allclose(torch.tensor(r['grads'][name]), p.grad.flatten(), rtol=1e-5, atol=1e-6), name
print('2-D mesh, every rank: the gradients of one process')
pp4 = d2l.read_rank_results('out', 'pp4', 4)
for run in (k for k in pp4[0] if k != 'rank'):
    _, bubble, _ = replay_pipeline([[a[:2] for a in r[run]['order']] for r in pp4])
    m = int(run.split('=')[1])
    print(f'4 stages, {run:10}: bubble {bubble:.3f}, model {bubble_fraction(4, m):.3f}')
    assert math.isclose(bubble, bubble_fraction(4, m), rel_tol=1e-9)"""))
A(md("""## The bubble from measured times

The replay above gives every forward one unit and every backward two. Each rank also measured the
CPU time of each of its forwards and backwards (`time.thread_time()`, which leaves out waiting for
a core). Replayed with those times, the stages are no longer equal: the last one also computes the
loss, and the machine's load adds noise. The bubble still shrinks as `m` grows, but no longer
follows the model, as the exercise on uneven stages predicts:"""))
A(code("""# NBVAL_IGNORE_OUTPUT
# CPU times depend on the machine and its load.
for schedule in ('GPipe', '1F1B'):
    measured = {m: replay_pipeline([r[f'{schedule} m={m}']['order'] for r in pp])[1] for m in (2, 4, 8, 16)}
    print(schedule, '  '.join(f'm={m}: {b:.2f} (model {bubble_fraction(2, m):.2f})' for m, b in measured.items()))
    assert 0 <= measured[16] < measured[2] < 1"""))
A(md(f"""On GPUs, each forward's and backward's time measured with [CUDA]({G}cuda) [events]({G}event) (lesson 4) feeds the same
replay; the model `(p - 1) / (m + p - 1)` holds as far as the stages take equal times."""))
A(code("""# Leave the scratch folder.
os.chdir(home)
scratch.cleanup()"""))
write_lesson('/work/main/notebooks/14_beyond_data_parallelism.ipynb', cells)
print(len(cells))
