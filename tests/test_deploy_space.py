"""`python -m lab deploy-space`: which files go to a Space, how the Hub will store each, what is refused, and the
command's messages. The upload itself needs the Hub, which cannot be reached from here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lab.cli import main
from lab.ops.deploy_space import (
    LARGE_ABOVE_BYTES,
    DeployError,
    check_repo_id,
    is_binary,
    listing,
    refusal,
    space_files,
    storage,
)

ROOT = Path(__file__).resolve().parent.parent
FAKE_TOKEN = "hf_" + "a1B2" * 9  # the shape of a Hugging Face token, not a real one


def git_repo(tmp_path: Path, files: dict[str, bytes], untracked: dict[str, bytes] | None = None) -> Path:
    """A git checkout holding files (tracked, even where a .gitignore would skip them) and untracked ones."""
    root = tmp_path / "repo"
    for path, data in {**files, **(untracked or {})}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-f", "--", *files], check=True)
    return root


APP = {
    "app.py": b"print('hello')\n",
    "README.md": b"---\nsdk: gradio\n---\n# caf\xc3\xa9\n",
    "raqa/__init__.py": b"",
    "assets/model.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      " + bytes(range(256)),
    "assets/picture.png": b"\x89PNG\r\n\x1a\n" + bytes(100),
    "assets/big.jsonl": b'{"text": "a"}\n' * (LARGE_ABOVE_BYTES // 14 + 1),
    "tests/test_app.py": b"def test(): pass\n",
    "lab/__init__.py": b"",
    ".ci/run": b"#!/bin/sh\n",
    "requirements-dev.txt": b"pytest\n",
}


def test_the_space_gets_the_tracked_files_a_space_runs_each_stored_as_the_hub_wants(tmp_path):
    root = git_repo(tmp_path, APP, untracked={"notes.txt": b"not tracked", ".venv/bin/python": b"\x7fELF"})
    files = {f.path: f for f in space_files(root)}
    assert sorted(files) == [
        "README.md",
        "app.py",
        "assets/big.jsonl",
        "assets/model.safetensors",
        "assets/picture.png",
        "raqa/__init__.py",
    ]
    assert {p: f.storage for p, f in files.items()} == {
        "README.md": "regular",  # UTF-8 text
        "app.py": "regular",
        "raqa/__init__.py": "regular",  # empty: the Hub keeps empty files as plain files
        "assets/model.safetensors": "large",
        "assets/picture.png": "large",
        "assets/big.jsonl": "large",  # text, but over 10 MB
    }
    assert files["assets/big.jsonl"].why == "over 10 MB" and files["assets/picture.png"].why == "binary"
    assert files["app.py"].size == len(APP["app.py"])
    table = listing(list(files.values()))
    assert "large    assets/picture.png  (binary)" in table
    assert table.splitlines()[-1].startswith("6 files, 10.0 MB; 3 stored as large files (LFS/Xet)")


@pytest.mark.parametrize(
    ("path", "data", "why"),
    [
        (".env", b"OPENAI_API_KEY=sk-1\n", "an environment file"),
        ("config/.env.production", b"X=1\n", "an environment file"),
        ("raqa/__pycache__/config.cpython-311.pyc", b"\x00", "a Python cache"),
        (".pytest_cache/v/cache/lastfailed", b"{}", "pytest's cache"),
        (".venv/lib/python3.11/site.py", b"", "a virtual environment"),
        ("venv/pyvenv.cfg", b"home = /usr\n", "a virtual environment"),
        ("deploy/server.pem", b"cert", "a key or certificate"),
        ("keys/id_rsa", b"key", "an SSH key"),
        ("hf_token", b"x", "a token file"),
        ("notes/setup.md", b"export HF_TOKEN=" + FAKE_TOKEN.encode() + b"\n", "looks like a Hugging Face token"),
        ("raqa/keys.py", b'KEY = """-----BEGIN RSA PRIVATE KEY-----\n"""\n', "looks like a private key"),
    ],
)
def test_caches_virtual_environments_and_secrets_are_refused_and_nothing_goes(tmp_path, path, data, why):
    root = git_repo(tmp_path, {**APP, path: data})
    with pytest.raises(DeployError, match="Refusing to deploy") as refused:
        space_files(root)
    assert f"{path}: " in str(refused.value) and why in str(refused.value)


def test_every_refused_file_is_named_at_once(tmp_path):
    root = git_repo(tmp_path, {**APP, ".env": b"A=1", "raqa/__pycache__/x.pyc": b"\x00"})
    with pytest.raises(DeployError) as refused:
        space_files(root)
    assert ".env: " in str(refused.value) and "raqa/__pycache__/x.pyc: " in str(refused.value)


def test_names_that_only_resemble_a_secret_are_not_refused():
    for path in ("raqa/retrieval/tokenize.py", "assets/judge/tokenizer.json", "raqa/environment.py", "keys.md"):
        assert refusal(path, b"text") is None, path


def test_binary_means_a_nul_byte_or_not_utf8_but_a_cut_character_is_text():
    assert not is_binary("naïve café ".encode() * 10)
    assert not is_binary("é".encode()[:1])  # the sample ends inside a character
    assert is_binary(b"abc\x00def") and is_binary(b"\xff\xfe\xfa text")
    assert storage(0, b"") == ("regular", "text")
    assert storage(LARGE_ABOVE_BYTES + 1, b"text") == ("large", "over 10 MB")
    assert storage(LARGE_ABOVE_BYTES, b"text") == ("regular", "text")


@pytest.mark.parametrize("repo_id", ["me/raqa", "my-org/raqa.demo", "A_b/c-1"])
def test_a_space_id_is_owner_slash_name(repo_id):
    assert check_repo_id(repo_id) == repo_id


@pytest.mark.parametrize(
    "repo_id",
    [
        "raqa",
        "me/",
        "/raqa",
        "me/raqa/x",
        "me/ra qa",
        "me/-raqa",
        "me/raqa.git",
        "me/ra..qa",
        "me/ra--qa",
        "me/" + "x" * 97,
        "",
    ],
)
def test_a_bad_space_id_is_refused_with_what_is_allowed(repo_id):
    with pytest.raises(DeployError, match="Invalid Space id"):
        check_repo_id(repo_id)


def test_not_a_git_checkout_says_so(tmp_path):
    with pytest.raises(DeployError, match="not a git checkout"):
        space_files(tmp_path)


def test_the_command_exits_2_with_a_message_on_a_bad_id(capsys):
    assert main(["deploy-space", "not a space", "--dry-run"]) == 2
    assert "error: Invalid Space id: 'not a space'. Write OWNER/NAME" in capsys.readouterr().err


def test_the_dry_run_lists_this_checkout_as_a_tree_the_hub_accepts(capsys):
    """This repository's own files: no test goes, the models and images are large files, and every file the Hub
    would refuse as a plain git file (over 10 MB, or binary) is stored as a large one."""
    assert main(["deploy-space", "me/raqa", "--dry-run"]) == 0
    out = capsys.readouterr()
    rows = [line.split() for line in out.out.splitlines()[:-1]]
    listed = {row[2]: (int(row[0].replace(",", "")), row[1]) for row in rows}
    assert "app.py" in listed and "README.md" in listed and "requirements-data.txt" in listed
    assert not any(p.startswith(("tests/", ".ci/", "lab/")) for p in listed)
    assert "raqa/service.py" in listed
    assert listed["assets/judge/model.safetensors"][1] == "large"
    assert listed["assets/screenshot.png"][1] == "large"
    for path, (size, how) in listed.items():
        head = (ROOT / path).read_bytes()[:512]
        if size > LARGE_ABOVE_BYTES or is_binary(head):
            assert how == "large", path
    assert "Dry run: nothing uploaded" in out.err


def test_the_command_runs_as_a_module():
    done = subprocess.run(
        [sys.executable, "-m", "lab", "deploy-space", "x", "--dry-run"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 2 and "Invalid Space id" in done.stderr
