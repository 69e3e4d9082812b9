"""Module tree: a tiny nested model recorded here (CPU, with_stack + with_modules), and the real
traces that carry python_function frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from analysis.modules import BOUND_NS, module_tree
from profiler import analyze, load_trace
from tests.conftest import write_trace, x

B, D, OUT = 4, 8, 2  # batch, width, head outputs


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.act = torch.nn.Linear(D, D), torch.nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(Block(), Block())
        self.head = torch.nn.Linear(D, OUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    torch.manual_seed(0)
    model, x = Net(), torch.randn(B, D)
    with torch.no_grad():
        model(x)  # warm-up outside the profile
        with profile(activities=[ProfilerActivity.CPU], with_modules=True, with_stack=True, record_shapes=True) as prof:
            model(x)
            model(x)
    path = tmp_path_factory.mktemp("modules") / "net.json"
    prof.export_chrome_trace(str(path))
    trace = load_trace(path)
    units = analyze(trace, sections=("roofline",)).units
    return trace, units, module_tree(trace, units)


def check_sums(tree: pd.DataFrame) -> None:
    """total = self + the children's totals, for time; bound columns split the total."""
    kids = tree[tree["depth"] > 0].groupby(["rank", "parent"])[["total_ns", "flops"]].sum()
    for row in tree.itertuples(index=False):
        below = (
            kids.loc[(row.rank, row.path)]
            if (row.rank, row.path) in kids.index
            else pd.Series({"total_ns": 0, "flops": 0.0})
        )
        assert row.total_ns == row.self_ns + below["total_ns"], row.path
        assert sum(getattr(row, c) for c in BOUND_NS) == row.total_ns, row.path
    assert (tree["self_ns"] <= tree["total_ns"]).all()


def test_module_paths_are_exact(recorded):
    _, _, tree = recorded
    # Kineto numbers the instances of each class: Linear_0, Linear_1 in the blocks, Linear_2 the head
    assert set(tree["path"]) == {
        "Net_0",
        "Net_0/Sequential_0",
        "Net_0/Sequential_0/Block_0",
        "Net_0/Sequential_0/Block_0/Linear_0",
        "Net_0/Sequential_0/Block_0/ReLU_0",
        "Net_0/Sequential_0/Block_1",
        "Net_0/Sequential_0/Block_1/Linear_1",
        "Net_0/Sequential_0/Block_1/ReLU_1",
        "Net_0/Linear_2",
    }
    row = tree.set_index("path").loc["Net_0/Sequential_0/Block_1/ReLU_1"]
    assert (row["name"], row["depth"], row["parent"]) == ("ReLU_1", 3, "Net_0/Sequential_0/Block_1")
    assert (tree["calls"] == 2).all()  # two forward passes


def test_totals_add_up(recorded):
    _, _, tree = recorded
    check_sums(tree)
    by = tree.set_index("path")
    # containers do no op work of their own here: everything is inside Linear / ReLU
    assert by.loc["Net_0/Sequential_0", "self_ns"] == 0 and by.loc["Net_0/Sequential_0/Block_0", "self_ns"] == 0
    # aten::addmm: 2*B*D*D FLOPs per call (one MAC is two FLOPs), two calls; aten::linear carries none
    assert by.loc["Net_0/Sequential_0/Block_0/Linear_0", "flops"] == 2 * (2 * B * D * D)
    assert by.loc["Net_0/Linear_2", "flops"] == 2 * (2 * B * D * OUT)


def test_root_total_is_the_unit_time_inside_the_forwards(recorded):
    trace, units, tree = recorded
    ev = trace.events
    roots = ev[ev["name"].astype(str) == "nn.Module: Net_0"]
    assert len(roots) == 2
    inside = np.zeros(len(units), dtype=bool)
    for r in roots.itertuples(index=False):  # CPU units: ops on the same thread, within the call
        thread = ev.set_index("id").loc[units["unit_id"], "thread"].to_numpy()
        inside |= (
            (units["start_ns"] >= r.ts).to_numpy() & (units["end_ns"] <= r.ts + r.dur).to_numpy() & (thread == r.thread)
        )
    root = tree.set_index("path").loc["Net_0"]
    assert root["total_ns"] == int(units.loc[inside, "time_ns"].sum()) > 0
    assert root["units"] == int(inside.sum())
    assert root["host_ns"] == int(roots["dur"].sum())


def test_no_module_frames_gives_an_empty_table(tmp_path):
    from tests.conftest import write_trace, x

    t = load_trace(write_trace(tmp_path / "t.json", [x("aten::add", "cpu_op", 0, 5)]))
    assert module_tree(t, analyze(t, sections=("roofline",)).units).empty


@pytest.mark.parametrize(
    "folder,root",
    [
        ("b200_eager", "GptOssForCausalLM_0"),
        ("sglang_qwen3_prefill_mi300x", "Qwen3Model_0"),
        ("vllm_graphs_mi300x", "GptOssForCausalLM_0"),
    ],
)
def test_real_traces_with_python_frames(folder, root):
    from tests.conftest import real_trace

    t = load_trace(real_trace(folder))
    units = analyze(t, sections=("roofline",)).units
    tree = module_tree(t, units)
    check_sums(tree)
    assert root in set(tree.loc[tree["depth"] == 0, "path"])
    # each unit is counted once, in one tree: the roots together hold at most all unit time
    assert tree.loc[tree["depth"] == 0, "total_ns"].sum() <= units["time_ns"].sum()
    assert tree.set_index("path").loc[root, "total_ns"] > 0


def test_tree_sorts_siblings_by_time_not_by_name(tmp_path):
    """Three layers whose names sort as text ('Layer_10' < 'Layer_2' < 'Layer_3') and whose
    times are 5, 30 and 9 µs: read by time, Layer_2 (30) then Layer_3 (9) then Layer_10 (5),
    each right after its parent; the small root Aux_0 (1 µs) after Net_0 (44 µs), not before."""
    ev = [
        x("nn.Module: Net_0", "python_function", 0, 100, tid=1),
        x("nn.Module: Aux_0", "python_function", 200, 10, tid=1),
    ]
    for name, start, dur in (("Layer_10", 1, 5), ("Layer_2", 10, 30), ("Layer_3", 50, 9)):
        ev += [
            x(f"nn.Module: {name}", "python_function", start, dur + 1, tid=1),
            x("aten::add", "cpu_op", start + 0.5, dur, tid=1),
        ]
    ev.append(x("aten::mul", "cpu_op", 201, 1, tid=1))
    t = load_trace(write_trace(tmp_path / "t.json", ev))
    from profiler.api import analyze

    tree = analyze(t, top=None, sections=("modules",)).modules
    assert list(tree["path"]) == ["Net_0", "Net_0/Layer_2", "Net_0/Layer_3", "Net_0/Layer_10", "Aux_0"]
    assert list(tree["total_ns"]) == [44_000, 30_000, 9_000, 5_000, 1_000]  # 30 + 9 + 5 µs under Net_0
