#!/usr/bin/env bash
# Download, here (where the package index is reachable), the Python 3.12 wheels that a
# GPU machine without network needs to run tools/record_gpu.py: nbval, the Jupyter
# kernel and client, and what they need; and the tools lessons 10-12 run. They go to .whl/ (git-ignored).
#
#   tools/fetch_gpu_wheels.sh            # then carry .whl/ to the GPU machine, and there:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH python3 tools/record_gpu.py OUTDIR   # bin/: tlparse, py-spy
#
# PyTorch, numpy, matplotlib, pytest and the like are NOT fetched: the GPU machine has
# its own (a CUDA build of PyTorch), and a copy from here would shadow it. Versions of
# what is fetched follow requirements.txt where it pins them.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON_VERSION:-3.12}
rm -rf .whl && mkdir -p .whl
pins=$(mktemp); trap 'rm -f "$pins"' EXIT
grep -E '^(nbval|nbformat|nbclient|ipykernel)==' requirements.txt > "$pins"
platforms=()
for n in 17 27 28 31 34; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
python3 -m pip download -q --only-binary=:all: --python-version "$PY" --implementation cp \
    "${platforms[@]}" -d .whl -r "$pins" 2> >(grep -v '^WARNING: Location' >&2)
# The tools lessons 10-12 run (HTA, tlparse, py-spy), and what HTA imports that the GPU
# machine lacks (plotly, pydot); its pandas, networkx, narwhals, pyparsing and PyYAML are
# there (the device tool's KINDS.md lists its packages). HTA also asks for JupyterLab and
# pytest, which the lessons do not use there.
tools=$(mktemp); trap 'rm -f "$pins" "$tools"' EXIT
grep -E '^(HolisticTraceAnalysis|plotly|pydot|tlparse|py-spy)==' requirements.txt > "$tools"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PY" --implementation cp \
    "${platforms[@]}" -d .whl -r "$tools" 2> >(grep -v '^WARNING: Location' >&2)
# Drop what the GPU machine already has, so that its own builds stay in charge.
for keep_theirs in torch numpy pytest pluggy iniconfig packaging psutil typing_extensions \
        execnet attrs python_dateutil six coverage pygments setuptools; do
    rm -f .whl/${keep_theirs}-[0-9]*.whl
done
ls .whl | sed 's/^/  /'
du -sh .whl
