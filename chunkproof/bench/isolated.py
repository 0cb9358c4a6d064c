"""One GPU case in a process of its own, for the probe scripts (benchmarks/gpu_*_probe.py):
an illegal memory access ends the CUDA context of the process it happens in, so each
case gets a fresh one, with CUDA_LAUNCH_BLOCKING=1 (the failing launch is the last one
its traceback names), optionally under one of compute-sanitizer's tools."""
import os
import shutil
import subprocess

SANITIZER_TOOLS = {"san": "memcheck", "init": "initcheck", "race": "racecheck"}


def split_tool(case):
    """'san:REST' -> ('memcheck', 'REST'); a case without a tool prefix -> (None, case)."""
    head, sep, rest = case.partition(":")
    return (SANITIZER_TOOLS[head], rest) if sep and head in SANITIZER_TOOLS else (None, case)


def run_isolated(cmd, tool=None, timeout=150.0):
    """(output, exit status or 'timeout' or None where no compute-sanitizer is installed)."""
    if tool:
        san = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
        if not os.path.exists(san):
            return "no compute-sanitizer on this machine", None
        cmd = [san, "--tool", tool, "--print-limit", "10"] + list(cmd)
    try:
        p = subprocess.run(cmd, env=dict(os.environ, CUDA_LAUNCH_BLOCKING="1"), capture_output=True, text=True,
                           timeout=timeout)
        return p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        text = "".join(t if isinstance(t, str) else t.decode(errors="replace") for t in (e.stdout, e.stderr) if t)
        return text + "\n(timed out)", "timeout"
