"""Secrets planted in a real trace never reach the terminal or any file `perf analyze` writes.

The seed is a real trace (SGLang decode on MI300X). Tokens go where real traces carry free text:
top-level metadata (an `environment` dump, `distributedInfo` extras, a `command_line`), event
names (a user annotation, an op and the top kernel, so they are printed), an unknown category
(it is echoed in "Problems met while reading") and the device's name. Harmless neighbours (PATH,
host names, the model name) must survive, or the redaction would be hiding everything.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler.cli import app
from tests.conftest import TRACES

SEED = TRACES / "sglang_qwen3_decode_mi300x" / "sglang_Qwen3-8B_decode.json.gz"
REPO = Path(__file__).resolve().parents[1]
WIDE = {"COLUMNS": "500"}  # no cell truncated: a secret must not survive merely by being cut off

# Plausibly shaped but fake credentials (assembled so that no scanner flags this file).
HF = "hf_" + "qW3eRt5yUi7oPaSdFgHjKlZxCvBnM1234567"
GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
JWT = ".".join(
    [
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
        "eyJzdWIiOiJ0cmFjZS11c2VyIiwiaWF0IjoxNzAwMDAwMDAwfQ",
        "c2lnbmF0dXJlLW9mLWEtZmFrZS1qd3QtMDEyMzQ1Njc4OQ",
    ]
)
AWS_ID = "AKIA" + "Q3EXAMPLE7TRACE9"  # 20 characters, as AWS issues them
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCY3xAmPlEkEy"  # 40
URL_PASSWORD = "hunter2-Sup3rS3cret"
HF_IN_NAME = "hf_" + "ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210"
GH_IN_CAT = "ghp_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp9Oo8"
HF_IN_DEVICE = "hf_" + "DeViCeNaMeToKeN0123456789abcdefghij"
# one more per string-bearing field that reaches an output (issue 11, section 1)
GH_AS_KEY = "ghp_" + "MeTaDaTaKeY0123456789abcdefghijklmn"  # a metadata dict KEY, not a value
HF_NESTED_KEY = "hf_" + "NeStEdKeY0123456789abcdefghijklmnop"  # a key deeper in the metadata
HF_IN_CONCRETE = "hf_" + "CoNcReTeInPuTs0123456789abcdefghijk"  # 'Concrete Inputs'
PW_IN_ARGV = "Sup3r-" + "ArgvPassw0rd-77"  # after '--password' in 'Concrete Inputs' (an argv list)
GH_IN_TYPE = "ghp_" + "InPuTtYpE0123456789abcdefghijklmnop"  # 'Input type'
HF_IN_COLLECTIVE = "hf_" + "CoLlEcTiVeNaMe0123456789abcdefghijk"  # 'Collective name'
HF_IN_PROCESS = "hf_" + "PrOcEsSnAmE0123456789abcdefghijklmn"  # a process_name metadata event
HF_IN_ARG_KEY = "hf_" + "ArGkEy0123456789abcdefghijklmnopqrs"  # an args key the reader does not keep
HF_IN_PYTHON = "hf_" + "PyThOnFrAmE0123456789abcdefghijklmn"  # a python_function frame (module) name
HF_IN_FILE = "hf_" + "FiLeNaMe0123456789abcdefghijklmnopqr"  # the trace file's name

SECRETS = {
    "hf": HF,
    "github": GH,
    "jwt": JWT,
    "aws id": AWS_ID,
    "aws secret": AWS_SECRET,
    "url password": URL_PASSWORD,
    "token in an event name": HF_IN_NAME,
    "token in a category": GH_IN_CAT,
    "token in the device name": HF_IN_DEVICE,
    "token as a metadata key": GH_AS_KEY,
    "token as a nested metadata key": HF_NESTED_KEY,
    "token in Concrete Inputs": HF_IN_CONCRETE,
    "password in a Concrete Inputs argv": PW_IN_ARGV,
    "token in Input type": GH_IN_TYPE,
    "token in a collective name": HF_IN_COLLECTIVE,
    "token in a process name": HF_IN_PROCESS,
    "token as an args key": HF_IN_ARG_KEY,
    "token in a python frame name": HF_IN_PYTHON,
    "token in the file name": HF_IN_FILE,
}
assert len(AWS_ID) == 20 and len(AWS_SECRET) == 40

PATH_VALUE = "/opt/conda/bin:/usr/local/cuda/bin:/usr/bin"
HOST = "node17.cluster.example.com"
PIP_HOST = "pypi.internal.example.com"


@functools.cache
def seed_doc_bytes() -> bytes:
    return gzip.decompress(SEED.read_bytes())


def planted_doc() -> dict:
    doc = json.loads(seed_doc_bytes())
    doc["environment"] = {
        "PATH": PATH_VALUE,
        "MASTER_ADDR": HOST,
        "HF_TOKEN": HF,
        "GITHUB_TOKEN": GH,
        "AWS_ACCESS_KEY_ID": AWS_ID,
        "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
        "WANDB_NOTES": f"run with Authorization: Bearer {JWT}",
        "PIP_INDEX_URL": f"https://builder:{URL_PASSWORD}@{PIP_HOST}/simple",
    }
    doc["distributedInfo"]["init_method"] = f"https://trainer:{URL_PASSWORD}@{HOST}:29500/rdzv"
    doc["distributedInfo"]["job_note"] = f"aws creds {AWS_ID} {AWS_SECRET}"
    doc["distributedInfo"]["session"] = JWT
    doc["command_line"] = (
        f"python -m sglang.launch_server --model Qwen3-8B --hf-token {HF} --github-token={GH} --jwt {JWT} --host {HOST}"
    )
    doc["deviceProperties"][0]["name"] = f"AMD Instinct MI300X {HF_IN_DEVICE}"

    events = doc["traceEvents"]
    annotation = next(e for e in events if e.get("cat") == "user_annotation")
    annotation["name"] = f"upload {HF_IN_NAME}"
    # an op that is listed in the top ops, and the kernel with the most device time
    op = next(e for e in events if e.get("cat") == "cpu_op" and e.get("name") == "aten::argmax")
    op["name"] = f"aten::argmax token={HF_IN_NAME}"
    kernels = [e for e in events if e.get("cat") == "kernel"]
    total = Counter()
    for e in kernels:
        total[e["name"]] += e["dur"]
    top = total.most_common(1)[0][0]
    for e in kernels:
        if e["name"] == top:
            e["name"] = f"gemm_{HF_IN_NAME}"
    for e in [e for e in events if e.get("cat") == "python_function"][:2]:
        e["cat"] = f"cat {GH_IN_CAT}"
    doc[GH_AS_KEY] = "a value under a token-shaped key"
    doc["distributedInfo"][HF_NESTED_KEY] = 1
    arange = next(e for e in events if e.get("name") == "aten::arange")
    arange["args"]["Concrete Inputs"] = [HF_IN_CONCRETE, "--password", PW_IN_ARGV, "", "", "False"]
    arange["args"]["Input type"] = ["Scalar", GH_IN_TYPE, "Scalar", "", "", "Scalar"]
    arange["args"]["Collective name"] = f"allreduce_{HF_IN_COLLECTIVE}"
    arange["args"][HF_IN_ARG_KEY] = 7
    events.append(
        {"ph": "M", "name": "process_name", "pid": arange["pid"], "tid": 0, "args": {"name": f"worker {HF_IN_PROCESS}"}}
    )
    frames = [e for e in events if e.get("cat") == "python_function"]
    if frames:
        frames[-1]["name"] = f"nn.Module: Loader_{HF_IN_PYTHON}"
    else:
        events.append({**arange, "cat": "python_function", "name": f"nn.Module: Loader_{HF_IN_PYTHON}", "args": {}})
    return doc


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    p = tmp_path / f"planted-{HF_IN_FILE}.pt.trace.json.gz"
    p.write_bytes(gzip.compress(json.dumps(planted_doc()).encode()))
    return p


def assert_clean(where: str, text: str) -> None:
    leaked = [k for k, s in SECRETS.items() if s in text]
    assert not leaked, f"{where} shows {leaked}"


def all_files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_planted_trace_still_reads(planted: Path):
    """The planting did not break the trace: the secrets are there to be found."""
    raw = gzip.decompress(planted.read_bytes()).decode() + planted.name
    for s in SECRETS.values():
        assert s in raw
    r = CliRunner().invoke(app, ["analyze", str(planted), "--json"], env=WIDE)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert any("argmax" in o["name"] for o in doc["ops"])  # the planted op is listed...
    assert doc["ops"][[o["kind"] for o in doc["ops"]].index("kernel")]["name"].startswith("gemm_")  # ...and the kernel


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_no_secret_in_cli_output(planted: Path, as_json: bool):
    r = CliRunner().invoke(app, ["analyze", str(planted)] + (["--json"] if as_json else []), env=WIDE)
    assert r.exit_code == 0, (r.output, r.exception)
    assert_clean("stdout", r.stdout)
    assert_clean("stderr", r.stderr)
    if not as_json:
        assert "aten::argmax" in r.stdout and "AMD Instinct MI300X" in r.stdout
        assert "Problems met while reading" in r.stdout and "unknown category" in r.stdout


def test_harmless_metadata_survives(planted: Path):
    r = CliRunner().invoke(app, ["analyze", str(planted), "--json"], env=WIDE)
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    meta = doc["metadata"]["ranks"]["0"]
    env = meta["environment"]
    assert env["PATH"] == PATH_VALUE
    assert env["MASTER_ADDR"] == HOST
    assert env["HF_TOKEN"] == env["GITHUB_TOKEN"] == env["AWS_SECRET_ACCESS_KEY"] == "<redacted>"
    assert env["PIP_INDEX_URL"] == f"https://builder:<redacted>@{PIP_HOST}/simple"
    assert meta["distributedInfo"]["init_method"] == f"https://trainer:<redacted>@{HOST}:29500/rdzv"
    assert meta["distributedInfo"]["world_size"] == 1 and meta["distributedInfo"]["rank"] == 0
    assert "--model Qwen3-8B" in meta["command_line"] and f"--host {HOST}" in meta["command_line"]
    assert meta["baseTimeNanoseconds"] == json.loads(seed_doc_bytes())["baseTimeNanoseconds"]
    # the problem is still reported, with the token cut out of its category
    unknown = {k: v for k, v in doc["problems"].items() if "unknown category" in k}
    assert list(unknown.values()) == [2], doc["problems"]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_no_secret_in_any_written_file(tmp_path: Path, planted: Path, as_json: bool):
    """`perf analyze [--json] > out` in a real process: scan stdout's file, stderr's, and every
    file that appeared in the working directory (the tool could have written a cache or a log)."""
    work = tmp_path / "cwd"
    work.mkdir()
    out, err = tmp_path / "report.out", tmp_path / "report.err"
    before = set(all_files(tmp_path))
    env = {**os.environ, **WIDE, "PYTHONPATH": str(REPO), "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path)}
    env.pop("PERF_DEBUG", None)
    with out.open("wb") as fo, err.open("wb") as fe:
        p = subprocess.run(
            [sys.executable, "-m", "profiler", "analyze", str(planted)] + (["--json"] if as_json else []),
            stdout=fo,
            stderr=fe,
            cwd=work,
            env=env,
            timeout=120,
        )
    assert p.returncode == 0, err.read_text()
    if as_json:
        json.loads(out.read_bytes())  # the redirected report is whole
    files = all_files(tmp_path)
    assert out in files and err in files
    for path, data in files.items():
        if path == planted:
            continue
        text = data.decode("utf-8", "replace")
        if path.suffix == ".gz":
            text = gzip.decompress(data).decode("utf-8", "replace")
        assert_clean(f"{path.relative_to(tmp_path)}{' (new)' if path not in before else ''}", text)


@pytest.mark.parametrize("suffix", [".pftrace", ".json", ".json.gz"])
def test_no_secret_in_exports(tmp_path: Path, planted: Path, suffix: str):
    # perf export writes the analysis and the trace's metadata: Perfetto protobuf (strings stored
    # as UTF-8 bytes) or Chrome JSON, gzip or not; no planted secret may be in any byte of them
    out = tmp_path / f"export{suffix}"
    r = CliRunner().invoke(app, ["export", str(planted), "-o", str(out)], env=WIDE)
    assert r.exit_code == 0, r.output
    assert_clean("perf export's messages", r.output)
    written = [p for p in tmp_path.iterdir() if p.name.startswith("export")]
    assert written
    for p in written:
        data = p.read_bytes()
        text = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8", "replace")
        assert_clean(p.name, text)


def test_no_secret_in_any_dashboard_page(planted: Path):
    """Every page's HTML and every callback's response (the Perfetto export's bytes included),
    with the planted trace selected, an op selected and a what-if preset chosen."""
    import base64

    from dashboard import app as dash_app
    from dashboard.testing import callback_body, callback_keys
    from dashboard.views import ops_for

    app = dash_app.create_app([planted])
    store = app.perf_store
    tid = store.entries()[0].trace_id
    top = ops_for(store, tid, None).iloc[0]
    assert str(top["name"]).startswith("gemm_<redacted>")  # the planted kernel is the top op, shown redacted
    client = app.server.test_client()
    seen = {
        "GET /": client.get("/").get_data(as_text=True),
        "GET layout": client.get("/_dash-layout").get_data(as_text=True),
    }
    assert_clean("the page's HTML", "".join(seen.values()))
    options = [{"label": e.label, "value": e.trace_id} for e in store.entries()]
    for hardware in ("", "h100-sxm"):
        for path in [p.PATH for p in dash_app.PAGES]:
            values = {
                "url.pathname": path,
                "trace-select.value": tid,
                "trace-select.options": options,
                "hardware.data": hardware,
                "selected-op.data": {"name": top["name"], "shapes": top["shapes"]},
                "compare-a.value": tid,
                "compare-b.value": tid,
                "export-btn.n_clicks": 1,
                "ops-table.page_size": 1000,
                "ops-table.page_current": 0,
                "hw-select.value": hardware,
                "ops-table.active_cell": {"row_id": 0},
                "roofline-graph.clickData": {"points": [{"customdata": [0]}]},
            }
            for key in callback_keys(app):
                r = client.post("/_dash-update-component", json=callback_body(app, key, values))
                assert r.status_code in (200, 204), (key, r.status_code)
                text = r.get_data(as_text=True)
                assert "internal error" not in text, (key, text[:500])
                seen[f"{path} {key[:40]}"] = text
                if "export-download" in key:  # the downloaded file: base64 of gzip bytes
                    content = json.loads(text)["response"]["export-download"]["data"]["content"]
                    seen["exported trace"] = gzip.decompress(base64.b64decode(content)).decode("utf-8", "replace")
    for where, text in seen.items():
        assert_clean(where, text)
    everything = "".join(seen.values())
    assert (
        "exported trace" in seen and "gemm_" in everything and "aten::argmax" in everything
    )  # the pages did show the trace
