"""Tests for profiler.model.redact: secrets never survive, ordinary trace text always does."""

from __future__ import annotations

import copy
import gzip
import json
import signal
import string

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from profiler.model.redact import REDACTED, might_hold_secret, _scan, is_secret_key, redact, redact_text
from tests.conftest import TRACES

# Fake but realistic-looking secrets: random bodies, fixed so failures reproduce.
# Each is glued together at run time so that secret scanners reading this file
# do not flag it.
HF = "hf" + "_M0XvqZjxTW3xvboSRt5Mh3dAwVtRMflhbm"
GHP = "ghp" + "_uaptt0Azn0DNRUQxA71p2Td8VKqxryo1nIj7"
GH_PAT = "github" + "_pat_BRd03Q2ybv097SHzxgQA6T_CvY4dhKMlRdZQ9QsTXUuSnH6av1Ib8pp1xxXHU0BScJXj675eVq30XYqaNU"
JWT = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiJmYWtlLXVzZXItNzczMSIsImlhdCI6MTcxNzAwMDAwMCwic2NvcGUiOiJyZWFkIn0"
    ".6HrlEOS47WgjKCu_0xxKhg5QjWV1mKaUyvBPs0jSO2J"
)
AWS_ID = "AKIA" + "FC048TTP08KFTT6O"
AWS_SECRET = "w3XVy27dFanUrOSE62ch" + "n4xdeJg1Kza5KxxGWfvm"
OPENAI = "sk-" + "proj-aQtKnP_VSGVBrYSuIb9OZiFZ3HLKv797TPNbpjava1bMZwIM"
ANTHROPIC = "sk-" + "ant-api03-lvdp5gjTrD8Osj_LnZ5R-j_8U_m7aSz7NRSOtv75y4SXvE9rwLbAtf6e9cpCGybY9lMR4pAwBp3GVy1P"
SLACK = "xox" + "b-912852815423-7518078375234-z6mYjWc7izH9DsTNAveadCL8"
GOOGLE = "AIza" + "dXd3eOa1Zcc_a4CgOFfqRgz7IhYePP2lny2"
PASSWORD = "xThvA0Eh" + "exWQ3czyrEvm"
OPAQUE = "kXbI8P0G" + "wAESV5nk"  # a secret with no recognisable shape: only its key gives it away
PEM_BODY = (
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK"
)
PEM_BEGIN = "-----BEGIN RSA PRIVATE" + " KEY-----"
PEM_END = "-----END RSA PRIVATE" + " KEY-----"
PEM = PEM_BEGIN + "\n" + PEM_BODY + "\n" + PEM_END

ALL_SECRETS = [HF, GHP, GH_PAT, JWT, AWS_ID, AWS_SECRET, OPENAI, ANTHROPIC, SLACK, GOOGLE, PASSWORD, OPAQUE, PEM_BODY]


def assert_clean(text: str) -> None:
    """No secret, nor a telling piece of one, is left in ``text``."""
    for secret in ALL_SECRETS:
        for piece in (secret, secret[4:20]):
            assert piece not in text, f"{piece!r} survived in {text!r}"


# --------------------------------------------------------------------------
# Token shapes in free text
# --------------------------------------------------------------------------

SHAPES = [
    # (what, input, expected output)
    ("hugging face", f"login with {HF} then run", f"login with {REDACTED} then run"),
    (
        "github classic",
        f"git push https://{GHP}@github.com/org/repo.git",
        f"git push https://{REDACTED}@github.com/org/repo.git",
    ),
    ("github fine-grained", f"token={GH_PAT}", f"token={REDACTED}"),
    ("github fine-grained, bare", f"using {GH_PAT}.", f"using {REDACTED}."),
    ("jwt", f"session restored from {JWT} ok", f"session restored from {REDACTED} ok"),
    ("aws key id", f"assumed role with {AWS_ID} in us-east-1", f"assumed role with {REDACTED} in us-east-1"),
    ("aws pair", f"{AWS_ID},{AWS_SECRET}", f"{REDACTED},{REDACTED}"),
    ("aws secret by key", f"aws_secret_access_key={AWS_SECRET}", f"aws_secret_access_key={REDACTED}"),
    (
        "aws secret after key, space",
        f"aws configure set aws_secret_access_key {AWS_SECRET}",
        f"aws configure set aws_secret_access_key {REDACTED}",
    ),
    ("openai", f"client = OpenAI({OPENAI!r})", f"client = OpenAI('{REDACTED}')"),
    ("anthropic", f"x-api-key {ANTHROPIC}", f"x-api-key {REDACTED}"),
    ("slack", f"posting to #perf via {SLACK}", f"posting to #perf via {REDACTED}"),
    ("google", f"maps?key={GOOGLE}&zoom=3", f"maps?key={REDACTED}&zoom=3"),
    (
        "bearer",
        f"curl -H 'Authorization: Bearer {JWT}' https://api.example.com/v1",
        f"curl -H 'Authorization: Bearer {REDACTED}' https://api.example.com/v1",
    ),
    ("bearer in prose", f"sent bearer {OPAQUE} upstream", f"sent bearer {REDACTED} upstream"),
    ("github token header", f'-H "Authorization: token {GHP}"', f'-H "Authorization: token {REDACTED}"'),
    ("pem", f"key file:\n{PEM}\nend", f"key file:\n{PEM_BEGIN}{REDACTED}{PEM_END}\nend"),
    (
        "pem truncated",
        "-----BEGIN OPENSSH PRIVATE" + " KEY-----\n" + PEM_BODY,
        "-----BEGIN OPENSSH PRIVATE" + f" KEY-----{REDACTED}",
    ),
    (
        "url password",
        f"https://mlops:{PASSWORD}@artifacts.example.com/models/llama.bin",
        f"https://mlops:{REDACTED}@artifacts.example.com/models/llama.bin",
    ),
    (
        "url password with @ and :",
        "postgresql://svc:" + "p@ss:w0rd" + "@db.internal:5432/runs",
        f"postgresql://svc:{REDACTED}@db.internal:5432/runs",
    ),
    (
        "url token query",
        f"https://hub.example.com/x?revision=main&access_token={OPAQUE}&dl=1",
        f"https://hub.example.com/x?revision=main&access_token={REDACTED}&dl=1",
    ),
    (
        "presigned url",
        f"https://b.s3.amazonaws.com/t.json?X-Amz-Credential={AWS_ID}%2F20240611&X-Amz-Signature={OPAQUE}",
        f"https://b.s3.amazonaws.com/t.json?X-Amz-Credential={REDACTED}&X-Amz-Signature={REDACTED}",
    ),
]


@pytest.mark.parametrize("what,text,expected", SHAPES, ids=[s[0] for s in SHAPES])
def test_token_shapes_are_replaced_and_context_kept(what: str, text: str, expected: str) -> None:
    out = redact_text(text)
    assert out == expected
    assert_clean(out)
    assert redact_text(out) == out


def test_regressions_found_by_fuzzing() -> None:
    # A token swallowing the start of the next key: the pair shows only after the token goes.
    assert redact_text(f"{HF}HF_TOKEN={OPAQUE}") == f"{REDACTED}_TOKEN={REDACTED}"
    # A rest-of-line header value must not eat a PEM header (its body is on the next lines).
    out = redact_text(f"Authorization: Bearer {OPAQUE} {PEM}")
    assert_clean(out)
    assert out.endswith(f"{PEM_BEGIN}{REDACTED}{PEM_END}")
    # The C++ "[with Key = int]" exemption needs GCC's exact shape.
    assert redact_text(f"[with HF_TOKEN={OPAQUE}") == f"[with HF_TOKEN={REDACTED}"
    # A value that ends in an AWS key id must not hide the secret after the comma.
    assert redact_text(f'"token": {AWS_ID},{AWS_SECRET}') == f'"token": {REDACTED},{REDACTED}'
    # A value never swallows the next flag, whose own value must go too.
    assert redact_text(f"TOKEN= --password {PASSWORD}") == f"TOKEN= --password {REDACTED}"
    # Non-ASCII letters before a key do not hide it.
    assert redact_text(f"éHF_TOKEN={OPAQUE}") == f"éHF_TOKEN={REDACTED}"


def test_every_planted_token_is_caught_on_its_own() -> None:
    for token in (HF, GHP, GH_PAT, JWT, AWS_ID, OPENAI, ANTHROPIC, SLACK, GOOGLE):
        assert redact_text(token) == REDACTED
        assert redact_text(f"({token})") == f"({REDACTED})"


# --------------------------------------------------------------------------
# Key/value pairs inside longer strings
# --------------------------------------------------------------------------

ENV_DUMP = "\n".join(
    [
        f"HF_TOKEN={HF}",
        "PATH=/usr/local/cuda/bin:/usr/bin:/bin",
        "PWD=/home/alice/llama-finetune",
        "OLDPWD=/home/alice",
        f"WANDB_API_KEY={OPAQUE}",
        f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}",
        f"DB_PASSWORD='{PASSWORD}'",
        "CUDA_VISIBLE_DEVICES=0,1,2,3",
        "TOKENIZERS_PARALLELISM=false",
        "GIT_AUTHOR_NAME=Alice Example",
        f"DATABASE_URL=postgres://runs:{PASSWORD}@db.internal:5432/runs",
    ]
)
ENV_DUMP_EXPECTED = "\n".join(
    [
        f"HF_TOKEN={REDACTED}",
        "PATH=/usr/local/cuda/bin:/usr/bin:/bin",
        "PWD=/home/alice/llama-finetune",
        "OLDPWD=/home/alice",
        f"WANDB_API_KEY={REDACTED}",
        f"AWS_SECRET_ACCESS_KEY={REDACTED}",
        f"DB_PASSWORD='{REDACTED}'",
        "CUDA_VISIBLE_DEVICES=0,1,2,3",
        "TOKENIZERS_PARALLELISM=false",
        "GIT_AUTHOR_NAME=Alice Example",
        f"DATABASE_URL=postgres://runs:{REDACTED}@db.internal:5432/runs",
    ]
)


def test_env_dump_string() -> None:
    assert redact_text(ENV_DUMP) == ENV_DUMP_EXPECTED
    # Same dump on one line, as `env | tr '\n' ' '` or a log line would show it.
    one_line = ENV_DUMP.replace("\n", " ").replace("Alice Example", "alice")
    expected = ENV_DUMP_EXPECTED.replace("\n", " ").replace("Alice Example", "alice")
    assert redact_text(one_line) == expected


COMMAND_LINES = [
    (
        f"torchrun --nproc-per-node 8 train.py --model meta-llama/Llama-3.1-8B --api-key {OPAQUE} --batch-size 8",
        f"torchrun --nproc-per-node 8 train.py --model meta-llama/Llama-3.1-8B --api-key {REDACTED} --batch-size 8",
    ),
    (
        f"python serve.py --hf-token={OPAQUE} --port 8000 --use-auth-token --trust-remote-code",
        f"python serve.py --hf-token={REDACTED} --port 8000 --use-auth-token --trust-remote-code",
    ),
    (
        f'mysql -u root --password "{PASSWORD} x" --database runs',
        f'mysql -u root --password "{REDACTED}" --database runs',
    ),
    (
        f"python bench.py --openai_api_key {OPENAI} --max-tokens 512 --num-tokens=128",
        f"python bench.py --openai_api_key {REDACTED} --max-tokens 512 --num-tokens=128",
    ),
]


@pytest.mark.parametrize("line,expected", COMMAND_LINES)
def test_command_lines(line: str, expected: str) -> None:
    out = redact_text(line)
    assert out == expected
    assert_clean(out)


def test_json_and_repr_pairs_inside_strings() -> None:
    doc = json.dumps({"model": "llama-3-8b", "hf_token": HF, "password": 1234, "auth": None, "lr": 0.0003})
    out = redact_text(doc)
    # A bare number under a secret key becomes a bare marker: not valid JSON
    # any more, but nothing downstream parses redacted text.
    assert out == (
        '{"model": "llama-3-8b", "hf_token": "<redacted>", "password": <redacted>, "auth": null, "lr": 0.0003}'
    )

    env_repr = repr({"HF_TOKEN": OPAQUE, "HOME": "/root", "SESSION_ID": 17})
    assert redact_text(env_repr) == f"{{'HF_TOKEN': '{REDACTED}', 'HOME': '/root', 'SESSION_ID': {REDACTED}}}"

    # JSON escaped once more, as when a config is stored inside a trace string.
    nested = json.dumps(json.dumps({"api_key": OPAQUE, "n": 3}))
    assert json.loads(json.loads(redact_text(nested))) == {"api_key": REDACTED, "n": 3}


def test_header_and_yaml_lines() -> None:
    text = f"Host: api.example.com\nAuthorization: Basic {OPAQUE}\nCookie: sid={OPAQUE}; theme=dark\nAccept: */*"
    assert redact_text(text) == (
        f"Host: api.example.com\nAuthorization: Basic {REDACTED}\nCookie: {REDACTED}\nAccept: */*"
    )
    assert redact_text(f"password: {PASSWORD}\nepochs: 3") == f"password: {REDACTED}\nepochs: 3"


# --------------------------------------------------------------------------
# Things that must NOT change
# --------------------------------------------------------------------------

ORDINARY = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
    "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(Params)",
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, "
    "true, false, false, false, true, true, false>(Flash_fwd_params)",
    "void std::__detail::_Map_base<Key, std::pair<Key const, T>> [with Key = int; T = float]",
    "<built-in method float of Tensor object at 0x7f1baf9907c0>",
    "/home/alice/venv/lib/python3.11/site-packages/torch/nn/modules/module.py(1747): _call_impl",
    "sglang/srt/mem_cache/memory_pool.py(1016): get_key_buffer",
    "vllm/v1/worker/gpu_model_runner.py(1121): _get_cumsum_and_arange",
    "step[EXTEND bs=15 toks=15360]",
    "num_key_value_heads=8 head_dim=128 max_tokens=4096 num_tokens=15360 key_cache=bf16",
    "INFO:2024-05-22 17:15:23 2910249:2910249 CuptiActivityProfiler.cpp:333] Record counts: Out-of-range = 4181",
    "[[4096, 4096], [4096], []]",
    "C3AB6FAA14D646299C1D8365B14308AD",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
    "nccl:all_gather cuda:nccl cpu:gloo,cuda:gloo",
    "https://pytorch.org/docs/stable/profiler.html#torch.profiler.profile",
    "sk-learn is not a package; tokenizer=fast keyboard=us monkey=patched",
    "file:///tmp/trace.json ssh://git@github.com/org/repo.git user@host:/path",
    "Bearer responsibilities: none",
    "",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert redact_text(text) == text


# An alphabet that cannot spell any trigger word or token prefix: no
# a/e/s/k/w/h/x in either case (every trigger needs one of them) and no '@'.
# It still has ':', '/', '=', quotes and dashes, so key/value and URL
# syntax is exercised with harmless keys.
SAFE_ALPHABET = "bcdfgijlmnopqrtuvyzBCDFGIJLMNOPQRTUVYZ0123456789 \t\n_.,:;()<>[]{}*&#/+-=|!'\"%~"


@given(st.text(alphabet=SAFE_ALPHABET, max_size=300))
def test_ordinary_random_text_is_untouched(text: str) -> None:
    assert redact_text(text) == text
    assert _scan(text) == text  # the pattern itself, past the pre-check


@pytest.fixture(scope="module")
def b200_trace() -> dict:
    with gzip.open(TRACES / "b200_eager" / "eager_trace.json.gz", "rt") as f:
        return json.load(f)


def test_real_event_names_survive(b200_trace: dict) -> None:
    names = {ev["name"] for ev in b200_trace["traceEvents"] if "name" in ev}
    assert len(names) > 500  # kernels, aten ops, python frames, annotations
    changed = [n for n in names if redact_text(n) != n]
    assert changed == []
    # The names must also survive the pattern itself, not just the pre-check.
    assert [n for n in names if _scan(n) != n] == []


def test_real_trace_survives_whole(b200_trace: dict) -> None:
    assert redact(b200_trace) == b200_trace


# --------------------------------------------------------------------------
# Key names
# --------------------------------------------------------------------------

SECRET_KEYS = [
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "GITHUB_TOKEN",
    "API_KEY",
    "apiKey",
    "x-api-key",
    "--api-key",
    "OPENAI_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SESSION_TOKEN",
    "SSH_KEY",
    "ssh_private_key",
    "key",
    "KEYS",
    "password",
    "DB_PASSWD",
    "MYSQL_PWD",
    "passphrase",
    "client_secret",
    "secret",
    "Authorization",
    "OAUTH_CLIENT_ID",
    "auth",
    "Cookie",
    "sessionid",
    "X-Amz-Signature",
    "X-Amz-Credential",
    "sig",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "private_key",
    "SENTRY_DSN",
    "SLACK_WEBHOOK_URL",
    "jwt",
    "accesstoken",
    "APIKEY",
    "HFToken",
    "refresh_token",
]
HARMLESS_KEYS = [
    "PWD",
    "OLDPWD",
    "pwd",
    "PATH",
    "HOME",
    "USER",
    "name",
    "cat",
    "ts",
    "dur",
    "args",
    "Call stack",
    "Input Dims",
    "keyboard",
    "monkey",
    "hotkey",
    "num_tokens",
    "max_tokens",
    "TOKENIZERS_PARALLELISM",
    "tokenizer",
    "GIT_AUTHOR_NAME",
    "author",
    "num_key_value_heads",
    "key_states",
    "key_padding_mask",
    "kernel_hash",
    "Process Group Ranks",
    "CUDA_VISIBLE_DEVICES",
    "MASTER_ADDR",
    "pass_count",
    "signal",
    "sigmoid",
    "",
    "bytes_per_token",
    "per_token_layer_bytes",
    "time_to_first_token",
]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", HARMLESS_KEYS)
def test_harmless_keys(key: str) -> None:
    assert not is_secret_key(key)


# --------------------------------------------------------------------------
# Structured values
# --------------------------------------------------------------------------


def test_env_dict() -> None:
    env = {
        "HF_TOKEN": HF,
        "PATH": "/usr/local/cuda/bin:/usr/bin",
        "PWD": "/home/alice/llama-finetune",
        "OLDPWD": "/home/alice",
        "WANDB_API_KEY": OPAQUE,
        "AWS_ACCESS_KEY_ID": AWS_ID,
        "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
        "MASTER_PORT": 29500,
        "SESSION_RETRIES": 3,  # numbers under secret keys go too: being safe is cheap
        "USE_AUTH": True,
        "GITHUB_TOKEN": "",  # empty: nothing to hide, and showing it is informative
        "AUTH_HEADER": None,
        "NOTES": f"rotated {GHP} yesterday",  # harmless key, shaped value
        "DATABASE_URL": f"postgres://runs:{PASSWORD}@db.internal:5432/runs",
    }
    before = copy.deepcopy(env)
    out = redact(env)
    assert env == before
    assert out == {
        "HF_TOKEN": REDACTED,
        "PATH": "/usr/local/cuda/bin:/usr/bin",
        "PWD": "/home/alice/llama-finetune",
        "OLDPWD": "/home/alice",
        "WANDB_API_KEY": REDACTED,
        "AWS_ACCESS_KEY_ID": REDACTED,
        "AWS_SECRET_ACCESS_KEY": REDACTED,
        "MASTER_PORT": 29500,
        "SESSION_RETRIES": REDACTED,
        "USE_AUTH": REDACTED,
        "GITHUB_TOKEN": "",
        "AUTH_HEADER": None,
        "NOTES": f"rotated {REDACTED} yesterday",
        "DATABASE_URL": f"postgres://runs:{REDACTED}@db.internal:5432/runs",
    }
    assert_clean(json.dumps(out))


def test_trace_like_document() -> None:
    trace = {
        "schemaVersion": 1,
        "traceName": "/tmp/tmpkgvvssf3.json",
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},
        "metadata": {
            "env": {"HF_TOKEN": HF, "CUDA_VISIBLE_DEVICES": "0"},
            "argv": ["train.py", "--api-key", OPAQUE, "--lr", "3e-4"],
            "cmdline": f"train.py --api-key {OPAQUE} --lr 3e-4",
            "credentials": {"user": "alice", "password": PASSWORD},
            "mirrors": ("https://hub.example.com", f"https://ci:{PASSWORD}@mirror.example.com/simple"),
        },
        "traceEvents": [
            {
                "ph": "X",
                "cat": "kernel",
                "name": "void at::native::vectorized_elementwise_kernel<4, float>",
                "pid": 0,
                "tid": 7,
                "ts": 1.5,
                "dur": 2.25,
                "args": {"grid": [132, 1, 1], "stream": 7},
            },
            {"ph": "i", "cat": "user_annotation", "name": f"debug {JWT}", "args": {"token": JWT}},
        ],
    }
    before = copy.deepcopy(trace)
    out = redact(trace)
    assert trace == before
    assert_clean(json.dumps(out))
    assert out["traceEvents"][0] == trace["traceEvents"][0]
    assert out["traceEvents"][1] == {
        "ph": "i",
        "cat": "user_annotation",
        "name": f"debug {REDACTED}",
        "args": {"token": REDACTED},
    }
    meta = out["metadata"]
    # A list of strings is read as an argv too: the item after a secret flag goes.
    assert meta["argv"] == ["train.py", "--api-key", REDACTED, "--lr", "3e-4"]
    assert meta["cmdline"] == f"train.py --api-key {REDACTED} --lr 3e-4"
    assert meta["credentials"] == REDACTED
    assert meta["mirrors"] == ("https://hub.example.com", f"https://ci:{REDACTED}@mirror.example.com/simple")
    assert out["distributedInfo"] == trace["distributedInfo"]
    assert out["traceName"] == trace["traceName"]


# --------------------------------------------------------------------------
# Properties: no mutation, idempotence, nothing planted survives
# --------------------------------------------------------------------------

KEYS = st.one_of(
    st.sampled_from(SECRET_KEYS + HARMLESS_KEYS),
    st.text(max_size=12),
)
PLANTED = [
    HF,
    GHP,
    JWT,
    f"{AWS_ID} {AWS_SECRET}",
    OPENAI,
    SLACK,
    GOOGLE,
    PEM,
    f"https://u:{PASSWORD}@h.example.com/p",
    f"HF_TOKEN={OPAQUE}",
    f"--password {PASSWORD}",
    f'"api_key": "{OPAQUE}"',
    f"Authorization: Bearer {OPAQUE}",
]
STRINGS = st.one_of(
    st.text(max_size=40),
    st.sampled_from(PLANTED + ORDINARY),
    st.lists(st.sampled_from(PLANTED + ORDINARY + ["", " ", "\n", "=", ": ", '"', "'", "x"]), max_size=6).map("".join),
)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), STRINGS)
JSON_LIKE = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(KEYS, children, max_size=5),
    ),
    max_leaves=30,
)


@settings(max_examples=300)
@given(JSON_LIKE)
@example(["-Passwd 0=", "0"])  # found by hypothesis: the redacted '-Passwd <redacted>' read as a flag
def test_redact_never_mutates_and_is_idempotent(value: object) -> None:
    before = copy.deepcopy(value)
    once = redact(value)
    assert value == before
    assert redact(once) == once


# Every input above that holds a secret, to be mixed into one string.
WITH_SECRETS = PLANTED + [shape[1] for shape in SHAPES] + [ENV_DUMP] + [line for line, _ in COMMAND_LINES]


@settings(max_examples=500)
@given(
    st.lists(st.sampled_from(WITH_SECRETS + ORDINARY) | st.text(max_size=20), max_size=8),
    st.sampled_from([" ", "\n", "; ", " | ", ", ", "\t", " = ", ": "]),
)
def test_planted_secrets_never_survive_in_text(parts: list[str], sep: str) -> None:
    # Neighbours must not shield a secret: fuzzing this found a header value
    # eating a PEM header, a pair value eating the next --flag, and an AWS
    # key id swallowed by a value while its secret sat past the comma.
    text = sep.join(parts)
    out = redact_text(text)
    if any(p in WITH_SECRETS for p in parts):
        assert_clean(out)
    assert redact_text(out) == out


@settings(max_examples=300)
@given(st.one_of(STRINGS, st.text(alphabet=string.printable, max_size=80)))
def test_precheck_is_only_an_optimisation(text: str) -> None:
    # Whatever the pre-check turns away, the pattern itself would have left alone.
    if not might_hold_secret(text):
        assert _scan(text) == text


def test_argv_lists() -> None:
    argv = ["serve.py", "--hf-token", OPAQUE, "--use-auth-token", "--port", "8000", "--password", "", "--token=x"]
    expected = [
        "serve.py",
        "--hf-token",
        REDACTED,
        "--use-auth-token",
        "--port",
        "8000",
        "--password",
        "",
        f"--token={REDACTED}",
    ]
    assert redact(argv) == expected
    assert redact(tuple(argv)) == tuple(expected)
    # A flag followed by another flag hides nothing; a non-string resets.
    assert redact(["--api-key", "--verbose", "run"]) == ["--api-key", "--verbose", "run"]
    assert redact(["--api-key", 3, "run"]) == ["--api-key", 3, "run"]


PATHOLOGICAL = {
    "harmless key chain": ": ".join(["tokens"] * 8000),
    "harmless kwarg chain": "=".join(["tokens"] * 8000),
    "secret kwarg chain": " = ".join(["token"] * 8000),
    "secret key chain": ": ".join(["token"] * 8000),
    "query chain": "?tokens=a" * 8000,
    "secret query chain": "?token=a" * 8000,
    "open quotes": '"token' * 8000,
    "url-ish": "a://b:c" * 8000,
    "flags": "--tokens a" * 8000,
    "bearer": "bearer 1" * 8000,
    "cut PEM headers": "-----BEGIN " * 8000,
}


@pytest.mark.parametrize("what", list(PATHOLOGICAL))
def test_pathological_input_stays_linear(what: str) -> None:
    # Each of these took minutes when some branch rescanned the rest of the line per match;
    # linear work is a few milliseconds. Not a timing threshold: the alarm only catches the
    # quadratic blow-up (467 s once), which no noisy machine turns a linear run into.
    text = PATHOLOGICAL[what]

    def blown_up(*_: object) -> None:
        raise AssertionError(f"redact_text took over 60 s on {what!r}: quadratic again")

    old = signal.signal(signal.SIGALRM, blown_up)
    signal.alarm(60)
    try:
        out = redact_text(text)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert redact_text(out) == out


def test_rejects_non_strings() -> None:
    with pytest.raises(TypeError):
        redact_text(b"hf_bytes")  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# True and false positives met in real traces and reports (issue 11): code and error messages
# that look like key/value pairs are not credentials; the same shapes with a credential are.
# --------------------------------------------------------------------------

NOT_SECRETS = [
    "KVCache.update(key=k, value=v)",  # a KV-cache update: key and value are tensors
    "MemoryPool.set_kv_buffer(layer, loc, key=cache_k, value=cache_v)",
    "sorted(ops, key=len)",
    "update(x, key = self.k )",
    "KeyError: 'weight'",  # an exception and its message
    "KeyError: weight",
    "TokenExpiredError: the hub session ended",
    "torch.nn.modules.sparse.Embedding.forward(input, key_padding_mask=mask)",
    "past_key_values: 32 layers",
]
STILL_SECRETS = [
    (f"KVCache.update(key={OPAQUE}, value=v)", f"KVCache.update(key={REDACTED}, value=v)"),  # digits: not a Python name
    ("f(api_key=k)", f"f(api_key={REDACTED})"),  # a qualified name is a credential whatever its value
    (f"key={OPAQUE}", f"key={REDACTED}"),  # no call around it
    ("KEY=sesame", f"KEY={REDACTED}"),  # an env line
    (f"key: {PASSWORD}", f"key: {REDACTED}"),
    (f"KeyError: {HF}", f"KeyError: {REDACTED}"),  # a token is a token, wherever it is
]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_code_and_errors_are_not_secrets(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize("text,expected", STILL_SECRETS)
def test_the_same_shapes_with_a_credential_are(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_secret_dict_keys_are_redacted_and_both_values_kept() -> None:
    doc = {HF: 1, GHP: 2, "PATH": "/usr/bin", "nested": {f"id {JWT}": "x"}}
    out = redact(doc)
    assert out == {REDACTED: 1, f"{REDACTED} (2)": 2, "PATH": "/usr/bin", "nested": {f"id {REDACTED}": "x"}}
    assert redact(out) == out


def test_a_whole_trace_is_redacted_once_at_load(tmp_path) -> None:
    from profiler.api import load_trace

    trace_doc = {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f"aten::mm {HF}",
                "pid": 1,
                "tid": 1,
                "ts": 1.0,
                "dur": 2.0,
                "args": {
                    "Concrete Inputs": ["", "--api-key", OPAQUE],
                    "Input type": [f"float {GHP}"],
                    "Input Dims": [[2, 2]],
                },
            },
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "KVCache.update(key=k, value=v)",
                "pid": 1,
                "tid": 1,
                "ts": 4.0,
                "dur": 1.0,
            },
        ],
        GHP: {"inner": PASSWORD, "password": PASSWORD},
    }
    p = tmp_path / "t.json"
    p.write_text(json.dumps(trace_doc))
    t = load_trace(p)
    names = set(t.events["name"].astype(str))
    assert names == {f"aten::mm {REDACTED}", "KVCache.update(key=k, value=v)"}
    row = t.events[t.events["name"] == f"aten::mm {REDACTED}"].iloc[0]
    assert json.loads(row["concrete"]) == ["", "--api-key", REDACTED]  # still JSON: the argv rule applied
    assert json.loads(row["dtypes"]) == [f"float {REDACTED}"] and row["shapes"] == "[[2,2]]"
    assert t.metadata["ranks"]["0"][REDACTED] == {
        "inner": PASSWORD,
        "password": REDACTED,
    }  # the key went, the value stayed
