"""Deploy this checkout as a Hugging Face Space: which files go, how the Hub will store each, and the upload.

The files are the ones git tracks (`git ls-files`), as they are on disk, less what a Space never uses: the lab
(training, measurement and this deploy: raqa never imports it), the tests, the CI script and the test-only
requirements (`LEFT_OUT`; CI runs the tests on the repository, a Space runs app.py). Any selected file that looks like a cache, a virtual environment or a secret is refused, and then nothing
is uploaded: a tracked secret must come out of the repository, not be skipped quietly. The Hub keeps binary files
and files over 10 MB as large files (LFS/Xet) and rejects them as plain git blobs; huggingface_hub's commit API
asks the Hub and stores each file that way itself, and `storage` predicts the Hub's answer for the dry run.

Left out: making a git history the Hub accepts (this uploads files, so the repository's own history and CI are
untouched), the Space's hardware and secrets (set them in the Space's settings), and retries beyond
huggingface_hub's own.
"""

from __future__ import annotations

import codecs
import fnmatch
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from lab.records import ROOT

LARGE_ABOVE_BYTES = 10 * 1000 * 1000  # the Hub rejects plain git files over 10 MB
SAMPLE_BYTES = 512  # what huggingface_hub sends the Hub of each file to decide (lfs.UploadInfo.sample)
# what a Space does not need: the tests and their tools run in CI on the repository, never on the Space
LEFT_OUT = ("lab/*", "tests/*", ".ci/*", "requirements-dev.txt", ".gitignore")
# a folder anywhere on the path that holds caches or virtual environments
REFUSED_FOLDERS = {
    "__pycache__": "a Python cache",
    ".pytest_cache": "pytest's cache",
    ".ruff_cache": "ruff's cache",
    ".mypy_cache": "mypy's cache",
    ".hypothesis": "hypothesis's cache",
    ".ipynb_checkpoints": "a notebook cache",
    ".cache": "a cache",
    ".venv": "a virtual environment",
    "venv": "a virtual environment",
    "site-packages": "installed packages",
    "node_modules": "installed packages",
    ".git": "git's own files",
}
# file names of secrets and compiled files
REFUSED_NAMES = {
    ".env": "an environment file (secrets)",
    ".env.*": "an environment file (secrets)",
    "*.pem": "a key or certificate",
    "*.key": "a private key",
    "*.p12": "a key store",
    "*.pfx": "a key store",
    "id_rsa*": "an SSH key",
    "id_ed25519*": "an SSH key",
    ".netrc": "login credentials",
    ".pypirc": "PyPI credentials",
    "token": "a token file",
    "*.token": "a token file",
    "hf_token": "a token file",
    "credentials*": "credentials",
    "secrets.*": "secrets",
    "*.pyc": "compiled Python",
}
# contents that are secrets whatever the file is called
SECRET_TEXT = {
    "a Hugging Face token": re.compile(rb"\bhf_[A-Za-z0-9]{30,}\b"),
    "a private key": re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
}
REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")

Storage = Literal["regular", "large"]


class DeployError(ValueError):
    """The Space cannot be deployed as asked; the message says what to change."""


@dataclass(frozen=True)
class SpaceFile:
    path: str  # relative to the checkout, with forward slashes (the path in the Space)
    size: int  # bytes
    storage: Storage  # "large": LFS/Xet on the Hub; "regular": a plain git file
    why: str  # why it is stored so, for the dry run


def check_repo_id(repo_id: object) -> str:
    """OWNER/NAME as the Hub spells a repository, or DeployError saying what is wrong.

    Example:
        >>> check_repo_id("me/raqa-demo")
        'me/raqa-demo'
    """
    if not isinstance(repo_id, str) or not REPO_ID.fullmatch(repo_id) or ".." in repo_id or "--" in repo_id:
        raise DeployError(
            f"Invalid Space id: {repo_id!r}. Write OWNER/NAME: letters, digits, '-', '_' and '.', each part at most "
            "96 characters, starting with a letter or digit (for example me/raqa)."
        )
    if repo_id.endswith((".git", ".")) or repo_id.split("/")[1].startswith("."):
        raise DeployError(f"Invalid Space id: {repo_id!r}. A name may not end in '.git' or '.'.")
    return repo_id


def is_binary(sample: bytes) -> bool:
    """A NUL byte or text that is not UTF-8 (a character cut at the end of the sample does not count)."""
    if b"\x00" in sample:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)
    except UnicodeDecodeError:
        return True
    return False


def storage(size: int, sample: bytes) -> tuple[Storage, str]:
    """How the Hub stores a file of this size starting with sample, and why (an empty file is always regular)."""
    if size > LARGE_ABOVE_BYTES:
        return "large", f"over {LARGE_ABOVE_BYTES // 1_000_000} MB"
    if size and is_binary(sample[:SAMPLE_BYTES]):
        return "large", "binary"
    return "regular", "text"


def refusal(path: str, head: bytes) -> str | None:
    """Why this file must not go to a public Space (a cache, a virtual environment, a secret), or None."""
    parts = PurePosixPath(path).parts
    for folder in parts[:-1]:
        if folder in REFUSED_FOLDERS:
            return f"{REFUSED_FOLDERS[folder]} ({folder}/)"
    for pattern, what in REFUSED_NAMES.items():
        if fnmatch.fnmatch(parts[-1].lower(), pattern):
            return what
    for what, pattern in SECRET_TEXT.items():
        if pattern.search(head):
            return f"it holds what looks like {what}"
    return None


def tracked_files(root: Path) -> list[str]:
    """The files git tracks in root (DeployError when root is not a git checkout)."""
    try:
        done = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise DeployError(f"{root} is not a git checkout, so the files to deploy cannot be chosen ({e}).") from None
    return sorted(p for p in done.stdout.decode("utf-8").split("\0") if p)


def space_files(root: Path = ROOT) -> list[SpaceFile]:
    """The files to upload, with size and storage; DeployError listing every refused file, when any is."""
    chosen, refused = [], []
    for path in tracked_files(root):
        if any(fnmatch.fnmatch(path, pattern) for pattern in LEFT_OUT):
            continue
        file = root / path
        if not file.is_file():  # deleted in the working tree, or a submodule
            continue
        with file.open("rb") as f:
            head = f.read(1024 * 1024)  # secrets are looked for in the first MB
        why_not = refusal(path, head)
        if why_not:
            refused.append(f"{path}: {why_not}")
            continue
        size = file.stat().st_size
        chosen.append(SpaceFile(path, size, *storage(size, head)))
    if refused:
        raise DeployError("Refusing to deploy, these files must not go to a Space:\n  " + "\n  ".join(refused))
    return chosen


def listing(files: list[SpaceFile]) -> str:
    """The dry run's table: each file's size and storage, then the totals."""
    lines = [f"{f.size:>12,}  {f.storage:<7}  {f.path}  ({f.why})" for f in files]
    large = [f for f in files if f.storage == "large"]
    total = sum(f.size for f in files)
    lines.append(
        f"{len(files)} files, {total / 1e6:.1f} MB; {len(large)} stored as large files (LFS/Xet), "
        f"{sum(f.size for f in large) / 1e6:.1f} MB"
    )
    return "\n".join(lines)


def deploy(repo_id: str, files: list[SpaceFile], token: str, root: Path = ROOT, private: bool = False) -> str:
    """Create the Space (Gradio SDK) if needed and commit the files in one commit, removing files the Space has
    that are not among them; returns the commit's URL. huggingface_hub stores each file as the Hub asks."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi  # lazy: only a deploy needs it

    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="space", space_sdk="gradio", private=private, exist_ok=True)
    keep = {f.path for f in files}
    stale = [p for p in api.list_repo_files(repo_id, repo_type="space") if p not in keep and p != ".gitattributes"]
    operations = [CommitOperationAdd(path_in_repo=f.path, path_or_fileobj=str(root / f.path)) for f in files]
    operations += [CommitOperationDelete(path_in_repo=p) for p in stale]
    commit = api.create_commit(
        repo_id, operations, commit_message="Deploy raqa with python -m lab deploy-space", repo_type="space"
    )
    return commit.commit_url
