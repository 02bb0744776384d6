"""The button a long wait offers (render.line_html): it picks the small model's reader in the Reader choice and
presses Run, so the visitor's run reads now. The page's newest run replaces the waiting one (page_runs.py), which
leaves the line at its next place update."""

from __future__ import annotations

import gradio as gr

OFFER_JS = """() => {
  if (window.__raqaOffer) return;
  window.__raqaOffer = true;
  document.addEventListener("click", (event) => {
    const button = event.target.closest && event.target.closest(".raqa-take-offer");
    if (!button) return;
    const wanted = button.dataset.reader;
    const choice = [...document.querySelectorAll("#raqa-reader label")].find((l) => l.textContent.trim() === wanted);
    const input = choice && choice.querySelector("input");
    if (!input) return;
    input.click();
    setTimeout(() => document.querySelector("#raqa-run").click(), 100);
  });
}"""


def offer_controls(demo: gr.Blocks) -> None:
    """Listen for the offer's button on every page load."""
    demo.load(None, js=OFFER_JS)
