"""Every counter sample in tests/data/counters reads without loss (counted here independently, with
the csv and json modules), values carry their units, and version differences read alike."""

from __future__ import annotations

import csv
import gzip
import json

import pytest

from collectors.counters import read_counters
from profiler.model.errors import InputError
from tests.conftest import COUNTERS

NCU = [
    COUNTERS / "ncu_a100_attention" / "bert_flashattn_nsight.csv",
    COUNTERS / "ncu_a100_attention" / "bert_torch_nsight.csv",
    COUNTERS / "ncu_a100_dropout" / "nsight162.csv",
]


@pytest.mark.parametrize("path", NCU, ids=lambda p: p.name)
def test_ncu_samples_read_without_loss(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    metric_rows = [r for r in rows if r["Metric Name"]]
    rule_rows = [r for r in rows if not r["Metric Name"]]
    kc = read_counters(path)
    assert kc.source == "ncu"
    assert len(kc.rows) == len(metric_rows)  # every metric row, one counter row each
    assert kc.skipped.get("rule rows", 0) == len(rule_rows)  # the rest are rule rows, counted
    assert len(kc.launches) == len({r["ID"] for r in rows})
    assert set(kc.rows["counter"]) == {r["Metric Name"] for r in metric_rows}
    units = {r["Metric Name"]: r["Metric Unit"] for r in metric_rows}
    assert dict(zip(kc.rows["counter"], kc.rows["unit_recorded"])) == units  # recorded units kept


def test_ncu_thousands_separators_and_time():
    kc = read_counters(NCU[2])
    w = kc.wide()
    # the file writes "4,194,688" byte and "11,744" nsecond for launch 0
    assert w.loc[0, "dram__bytes.sum"] == 4_194_688
    assert w.loc[0, "gpu__time_duration.sum"] == 11_744
    assert kc.launches.loc[0, "duration_ns"] == 11_744
    assert list(kc.launches["occurrence"]) == list(range(162))  # 162 launches of one kernel, in order


def test_ncu_text_values_are_kept_as_text():
    kc = read_counters(NCU[0])
    r = kc.rows[kc.rows["counter"] == "Function Cache Configuration"]
    assert len(r) == 10 and (r["text"] != "").all() and r["value"].isna().all()


def test_rocprof_compute_folder_reads_without_loss():
    folder = COUNTERS / "rocprof_mi325x_gemm"
    with open(folder / "pmc_perf.csv", newline="") as f:
        header, *body = list(csv.reader(f))
    identity = {"Dispatch_ID", "Kernel_Name", "GPU_ID"}  # in the launches table; the rest are counters
    pmc = [h for h in header if h not in identity]
    extra = set()
    for name in ("SQ_IFETCH_LEVEL", "SQ_INST_LEVEL_LDS", "SQ_INST_LEVEL_SMEM", "SQ_INST_LEVEL_VMEM", "SQ_LEVEL_WAVES"):
        with open(folder / f"{name}.csv", newline="") as f:
            h = next(csv.reader(f))
        extra |= set(h) - set(header) - identity
    kc = read_counters(folder)
    assert kc.source == "rocprof-compute"
    assert len(body) == 270 and len(kc.launches) == 270
    assert len(kc.rows) == 270 * (len(pmc) + len(extra))  # every dispatch, every counter of every pass
    assert set(kc.rows["counter"]) == set(pmc) | extra
    assert kc.info["timeline"] == {"matched": 270, "timeline_only": 0, "counters_only": 0, "name_mismatch": 0}
    # timestamps in ns: End - Start of dispatch 6 (the first hipBLASLt GEMM), from pmc_perf.csv
    row = next(r for r in body if r[0] == "6")
    start, end = int(row[header.index("Start_Timestamp")]), int(row[header.index("End_Timestamp")])
    assert kc.launches.set_index("launch").loc[6, "duration_ns"] == end - start == 158_834


def test_kineto_cupti_trace_reads_without_loss():
    path = COUNTERS / "kineto_cupti_a100" / "benchmark_result_924719_1679055439_trace.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    ranges = [e for e in events if e.get("cat") == "cuda_profiler_range"]
    kc = read_counters(path)
    assert len(kc.launches) == len(ranges) == 77
    assert len(kc.rows) == sum(len(e["args"]) for e in ranges)
    assert (kc.rows["unit"] == "inst").all()
    assert kc.info["gpu"] == "NVIDIA A100-PG509-200"


#: rocprofv3 --pmc ... --output-format csv: one row per counter per dispatch (rocprofiler-sdk
#: docs, "Using rocprofv3", counter collection output columns).
V3_HEADER = (
    "Correlation_Id,Dispatch_Id,Agent_Id,Queue_Id,Process_Id,Thread_Id,Grid_Size,Kernel_Id,Kernel_Name,"
    "Workgroup_Size,LDS_Block_Size,Scratch_Size,VGPR_Count,Accum_VGPR_Count,SGPR_Count,Counter_Name,"
    "Counter_Value,Start_Timestamp,End_Timestamp"
)


def test_rocprofv3_one_row_per_counter_per_dispatch(tmp_path):
    kernel = '"void gemm<float, 2>(float const*, int) [clone .kd]"'  # a comma inside the name
    lines = [V3_HEADER]
    for corr, d, start in ((11, 1, 1000), (12, 2, 5000)):
        for counter, value in (
            ("SQ_INSTS_VALU_MFMA_MOPS_BF16", 8),
            ("SQ_INSTS_VALU_FMA_F32", 3),
            ("GRBM_GUI_ACTIVE", 900),
        ):
            lines.append(
                f"{corr},{d},4,1,77,77,65536,9,{kernel},256,0,0,32,0,16,{counter},{value},{start},{start + 2500}"
            )
    path = tmp_path / "run_counter_collection.csv"
    path.write_text("\n".join(lines) + "\n")
    kc = read_counters(path)
    assert kc.source == "rocprofv3"
    assert len(kc.rows) == 6 and len(kc.launches) == 2
    assert list(kc.launches["correlation"]) == [11, 12]
    assert list(kc.launches["duration_ns"]) == [2500, 2500]
    assert kc.launches.loc[0, "kernel"] == "void gemm<float, 2>(float const*, int) [clone .kd]"
    from analysis.counters import measured

    m = measured(kc)
    assert list(m["flops_matrix_bf16"]) == [8 * 512, 8 * 512]  # MOPS in units of 512 FLOPs
    assert list(m["flops_vector_fp32"]) == [64 * 2 * 3, 64 * 2 * 3]  # 64 lanes, an FMA is 2 FLOPs


def test_older_ncu_columns_and_mixed_units(tmp_path):
    # ncu 2019-2020 long form: no Device / CC / rule columns; values in Kbyte / Mbyte / usecond
    head = (
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context","Stream",'
        '"Section Name","Metric Name","Metric Unit","Metric Value"'
    )
    name = '"void k<float, 4>(float*, int)"'
    pre = f'"0","1","python","h",{name},"2020-Jan-01 00:00:00","1","7","Command line profiler metrics"'
    rows = [
        f'{pre},"dram__bytes.sum","Mbyte","1.50"',
        f'{pre},"lts__t_bytes.sum","Kbyte","2,048.00"',
        f'{pre},"gpu__time_duration.sum","usecond","12.5"',
    ]
    path = tmp_path / "old.csv"
    path.write_text("\n".join([head, *rows]) + "\n")
    kc = read_counters(path)
    r = kc.rows.set_index("counter")
    assert r.loc["dram__bytes.sum", "value"] == 1.5e6 and r.loc["dram__bytes.sum", "unit"] == "byte"
    assert r.loc["dram__bytes.sum", "unit_recorded"] == "Mbyte"
    assert r.loc["lts__t_bytes.sum", "value"] == 2_048_000  # SI: 1 Kbyte = 1000 bytes
    assert kc.launches.loc[0, "duration_ns"] == 12_500
    assert kc.launches.loc[0, "kernel"] == "void k<float, 4>(float*, int)"


def test_rocprof_v1_fetch_size_in_kilobytes(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text(
        "Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,arch_vgpr,accum_vgpr,sgpr,wave_size,sig,obj,FETCH_SIZE,WRITE_SIZE,BeginNs,EndNs\n"
        '0,"copy<int, 2>(int*) [clone .kd]",0,0,0,1,1,1024,256,0,0,8,0,16,64,0x0,0x1,4.5,2,100,400\n'
    )
    kc = read_counters(path)
    r = kc.rows.set_index("counter")
    assert r.loc["FETCH_SIZE", "value"] == 4.5 * 1024 and r.loc["FETCH_SIZE", "unit"] == "byte"
    assert r.loc["FETCH_SIZE", "unit_recorded"] == "KB"
    assert kc.launches.loc[0, "duration_ns"] == 300


def test_truncated_unknown_and_unitless_files_are_one_error(tmp_path):
    full = NCU[2].read_text()
    cut = tmp_path / "cut.csv"
    cut.write_text(full[: len(full) // 2])  # ends mid-row, inside a quoted field
    unknown = tmp_path / "unknown.csv"
    unknown.write_text("a,b,c\n1,2,3\n")
    unitless = tmp_path / "unitless.csv"
    unitless.write_text('"ID","Kernel Name","Metric Name","Metric Value"\n"0","k","dram__bytes.sum","12"\n')
    for path, says in ((cut, "truncated"), (unknown, "unknown counter file"), (unitless, "'Metric Unit'")):
        with pytest.raises(InputError) as e:
            read_counters(path)
        assert e.value.path == str(path) and says in e.value.problem


_SMALL_NCU = "".join(NCU[0].read_text().splitlines(keepends=True)[:40])
_SMALL_V3 = V3_HEADER + "\n" + '1,1,4,1,77,77,65536,9,"k<1, 2>",256,0,0,32,0,16,SQ_WAVES,4,100,200\n'


@pytest.mark.parametrize("text", [_SMALL_NCU, _SMALL_V3], ids=["ncu", "rocprofv3"])
def test_cut_or_corrupted_counter_files_read_or_fail_in_one_line(tmp_path, text):
    """A file cut anywhere, or with a byte replaced anywhere, reads or raises InputError of one
    line naming it: never another exception."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    data = text.encode()

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(cut=st.integers(1, len(data)), at=st.integers(0, len(data) - 1), byte=st.integers(0, 255))
    def check(cut, at, byte):
        for mangled in (data[:cut], data[:at] + bytes([byte]) + data[at + 1 :]):
            path = tmp_path / "c.csv"
            path.write_bytes(mangled)
            try:
                read_counters(path)
            except InputError as e:
                assert "\n" not in e.problem and e.path == str(path)

    check()


def test_newer_ncu_columns_device_and_launch_shape(tmp_path):
    # ncu 2023+: Block Size, Grid Size, Device, CC columns and Estimated Speedup rule columns
    head = (
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type",'
        '"Rule Description","Estimated Speedup Type","Estimated Speedup"'
    )
    launch = '"0","9","python","h","gemm_kernel","1","7","(128, 1, 1)","(48, 2, 1)","0","9.0"'
    pre = f'{launch},"Command line profiler metrics"'
    rule = f'{launch},"SOL","","",""'
    path = tmp_path / "new.csv"
    path.write_text(
        "\n".join(
            [
                head,
                f'{pre},"dram__bytes.sum","Kbyte","1,024.50","","","","",""',
                f'{rule},"SOLBottleneck","WRN","Memory is more heavily utilized than Compute","local","12.5"',
            ]
        )
        + "\n"
    )
    kc = read_counters(path)
    assert len(kc.rows) == 1 and kc.skipped == {"rule rows": 1}
    assert kc.rows.loc[0, "value"] == 1_024_500 and kc.rows.loc[0, "device"] == "gpu0 (cc 9.0)"
    assert (kc.launches.loc[0, "grid"], kc.launches.loc[0, "block"]) == ("(48, 2, 1)", "(128, 1, 1)")
