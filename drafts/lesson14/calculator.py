# DRAFT for d2l_utils/calculators.py (not installed): lesson 14's combinations behind sliders.
# Uses the lesson's helper d2l_utils.lessons.parallel_plans (after the build); add
# 'parallel_calculator' to __all__ and to the module docstring, and a cell in lesson 14's depth:
#     d2l.calculators.parallel_calculator()   # asserting its default row equals parallel_plans(8192, 80, 'H100', 64, ...)


def _plan_line(p):
    return (f"tp {p['tp']} pp {p['pp']} dp {p['dp']}: {_size(p['memory_bytes'])} a GPU "
            f"({'fits' if p['fits'] else 'does not fit'}), step {_time(p['step_s'])}")


def parallel_calculator(width=8192, layers=80, gpu='H100', gpus=64, log2_tokens=20, micro=16):
    """Lesson 14: every tensor x pipeline x FSDP split of a GPT over GPUs, by lesson 14's parallel_plans.
    Defaults: the lesson's larger example (width 8192, 80 blocks, 2^20 tokens, 64 H100s, 16 micro-batches)."""
    from .lessons import parallel_plans
    run = lambda **k: sorted(parallel_plans(**k, value_bytes=2), key=lambda p: (not p['fits'], p['step_s']))
    static = [_plan_line(p) for p in run(width=width, layers=layers, gpu=gpu, gpus=gpus,
                                         tokens=2 ** log2_tokens, micro=micro)[:4]]
    controls = _controls(lambda w: {
        'width': w.Dropdown(options=[2048, 4096, 5120, 8192, 12288, 16384], value=width, description='width'),
        'layers': w.IntSlider(value=layers, min=8, max=128, step=8, description='blocks'),
        'gpu': w.Dropdown(options=list(DATASHEET), value=gpu, description='GPU'),
        'gpus': w.Dropdown(options=[8, 16, 32, 64, 128, 256, 512], value=gpus, description='GPUs'),
        'log2_tokens': w.IntSlider(value=log2_tokens, min=14, max=24, description='tokens a step: 2^n, n ='),
        'micro': w.IntSlider(value=micro, min=1, max=64, description='micro-batches')})

    def compute(width, layers, gpu, gpus, log2_tokens, micro):
        plans = run(width=width, layers=layers, gpu=gpu, gpus=gpus, tokens=2 ** log2_tokens, micro=micro)
        rows = ''.join(f'<div>{html.escape(_plan_line(p))}</div>' for p in plans[:6])
        return f'<div>{sum(p["fits"] for p in plans)} of {len(plans)} splits fit; the fastest first:</div>' + rows
    return Calculator('Splitting a GPT over GPUs (lesson 14)', controls, compute, static)
