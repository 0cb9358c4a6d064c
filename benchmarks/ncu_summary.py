"""One row per kernel launch of an Nsight Compute CSV (`ncu --csv --page details`, as
benchmarks/gpu_ncu.sh writes it): time, DRAM and issue utilisation, registers, spills,
occupancy, a markdown table.

    python benchmarks/ncu_summary.py benchmarks/results/2026-12-04/ncu_kda/ncu_kda_fwd.csv [...]

Launches of PyTorch's own kernels (fills, copies) are left out."""
import csv
import sys
from pathlib import Path

from chunkproof.bench import args as A

PROG = "ncu_summary.py"
# (column, ncu metric name)
COLUMNS = (("us", "Duration"), ("DRAM", "DRAM Throughput"), ("issue busy", "Issue Slots Busy"),
           ("regs", "Registers Per Thread"), ("spill requests", "Local Memory Spilling Requests"),
           ("warps/SM", "Achieved Active Warps Per SM"), ("shared B", "Dynamic Shared Memory Per Block"))


def launches(path):
    """[(kernel name, block, grid, {metric: (value, unit)})] in launch order."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if len(r) > 14]
    if not rows or "Metric Name" not in rows[0]:
        raise ValueError(f"{path}: not an ncu --csv --page details file (no 'Metric Name' column)")
    ix = {h: i for i, h in enumerate(rows[0])}
    out = {}
    for r in rows[1:]:
        key = r[ix["ID"]]
        if key not in out:
            out[key] = (r[ix["Kernel Name"]], r[ix["Block Size"]], r[ix["Grid Size"]], {})
        out[key][3].setdefault(r[ix["Metric Name"]], (r[ix["Metric Value"]], r[ix["Metric Unit"]]))
    return [v for _, v in sorted(out.items(), key=lambda kv: int(kv[0]))]


def cell(metric, got):
    value, unit = got.get(metric, ("-", ""))
    if metric == "Duration" and value != "-":
        scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(unit, None)
        num = float(value.replace(",", ""))
        return f"{num * scale:.1f}" if scale is not None else f"{value} {unit}"
    return f"{value}%" if unit == "%" else value


def table(path):
    lines = [f"### {Path(path).name}", "", "| kernel | block | grid | " + " | ".join(c for c, _ in COLUMNS) + " |",
             "|---|---|---|" + "---|" * len(COLUMNS)]
    for name, block, grid, got in launches(path):
        if name.startswith("void at::") or "at::native" in name:
            continue
        lines.append(f"| `{name.split('(')[0][:40]}` | {block} | {grid} | "
                     + " | ".join(cell(m, got) for _, m in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = A.Parser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("csv", nargs="+")
    a = p.parse_args(argv)
    try:
        print("\n".join(table(path) for path in a.csv))
    except (OSError, ValueError) as e:
        return A.fail(PROG, e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
