"""Unit tests of the helper of lesson 7 (notebooks/07_distributed_data_parallel.ipynb).

The launch tests start real processes (a few seconds each: every process imports torch).
"""
import os
import subprocess
import textwrap
import time

import pytest

import d2l_utils as d2l

# One os.write per rank: a single write to a pipe is atomic, while print() may split a
# line into several writes (unbuffered stdout) that the two ranks then interleave.
WHO_AM_I = """
import os
line = f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} {os.environ.get('COURSE_TEST_VAR')}\\n"
os.write(1, line.encode())
"""


def _script(tmp_path, text, name='job.py'):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_torchrun_starts_one_process_per_rank_with_its_environment(tmp_path):
    script = _script(tmp_path, WHO_AM_I)
    run = d2l.torchrun(script, 2, timeout=120, env={'COURSE_TEST_VAR': 'seen'})
    assert run.returncode == 0, run.stderr
    assert sorted(run.stdout.splitlines()) == ['rank 0 of 2 seen', 'rank 1 of 2 seen']
    assert 'COURSE_TEST_VAR' not in os.environ          # set in the children only
    assert run.args[1:6] == ['-m', 'torch.distributed.run', '--standalone', '--nproc-per-node', '2']


def test_torchrun_passes_script_arguments_and_reports_failure(tmp_path):
    script = _script(tmp_path, "import sys; sys.exit(int(sys.argv[1]))")
    run = d2l.torchrun(str(script), 1, 3, timeout=120)
    assert run.returncode != 0 and run.args[-2:] == [str(script), '3']
    assert 'FAILED' in run.stderr


def test_torchrun_timeout_stops_launcher_and_workers(tmp_path):
    pid_file = tmp_path / 'worker.pid'
    script = _script(tmp_path, f"""
        import os, time
        open({str(pid_file)!r}, 'w').write(str(os.getpid()))
        time.sleep(600)
        """)
    start = time.perf_counter()
    with pytest.raises(subprocess.TimeoutExpired):
        d2l.torchrun(script, 1, timeout=15)
    assert time.perf_counter() - start < 60
    if pid_file.exists():                          # the worker had started: it must be gone
        pid = int(pid_file.read_text())
        time.sleep(0.5)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.parametrize('args, kwargs, error, message', [
    ((123, 2), {}, TypeError, 'script must be a path'),
    (('no/such/script.py', 2), {}, ValueError, 'no such script'),
    ((__file__, '2'), {}, TypeError, 'nproc_per_node must be an int'),
    ((__file__, True), {}, TypeError, 'nproc_per_node must be an int'),
    ((__file__, 2.0), {}, TypeError, 'nproc_per_node must be an int'),
    ((__file__, 0), {}, ValueError, 'must be >= 1'),
    ((__file__, 1), {'timeout': '10'}, TypeError, 'timeout must be a number'),
    ((__file__, 1), {'timeout': 0}, ValueError, 'timeout must be > 0'),
])
def test_torchrun_rejects_bad_input(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        d2l.torchrun(*args, **kwargs)
