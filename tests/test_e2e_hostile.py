"""Hostile text in the browser: a corpus file of pages written to attack the page, a hostile question and
hostile model replies. Everything must show as text; no script may run, no dialog open, no link lead to
`javascript:`, and the layout must hold (no page-wide horizontal scroll from a 5,000-letter word).

The corpus goes through the real JSONL loader and index (Service.load); the model is scripted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser import opened_tab, page_css
from scripted import ScriptedBackend

from lab.ops.reliability import serve
from raqa.config import AppConfig
from raqa.service import Service

pytestmark = pytest.mark.e2e

# Every payload tries to set window.__pwned (or open a dialog) if it is ever parsed as markup.
PAYLOADS = {
    "script": "<script>window.__pwned = 'script'</script>",
    "img": "<img src=x onerror=\"window.__pwned = 'img'\">",
    "svg": "<svg onload=\"window.__pwned = 'svg'\"></svg>",
    "iframe": "<iframe src=\"javascript:parent.__pwned = 'iframe'\"></iframe>",
    "link": "<a href=\"javascript:window.__pwned = 'link'\">click me</a>",
    "attribute": '" onmouseover="window.__pwned = \'attribute\'" x="',
    "details": "<details open ontoggle=\"window.__pwned = 'details'\"><summary>x</summary></details>",
    "style": "<style>body { display: none !important; }</style>",
    "markdown link": "[click me](javascript:window.__pwned='md')",
    "markdown image": '![x](https://example.invalid/x.png "onerror=alert(1)")',
    "template": "{{constructor.constructor('window.__pwned = 1')()}} ${alert(1)}",
    "alert": "<body onload=alert('pwned')>",
    "long word": "Mango" + "o" * 5000,
    "right-to-left": "\u202eognam sdrawkcab\u202c and \u2067isolate\u2069 text",
    "zero-width": "man\u200bgo\u200c\u200d\ufeff words",
}


def _corpus(folder: Path) -> Path:
    lines = []
    for n, (name, payload) in enumerate(PAYLOADS.items()):
        lines.append(
            {
                "id": f"h{n}" if name != "attribute" else f"h{n}{payload}",
                "title": f"Mango {name} {payload}",
                "text": f"The mango is a tropical fruit. {payload} Mango trees grow in India.",
            }
        )
    lines.append({"id": "good", "title": "Mango", "text": "The mango is a fruit. Mango trees grow in India."})
    path = folder / "hostile.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _reply(messages) -> str:
    user = messages[-1]["content"]
    if "Page good:" in user:  # the window holding the plain page gets a hostile reply that cites it
        return (
            "ANSWER: India <script>window.__pwned = 'reply'</script> <img src=x onerror=alert(1)> "
            "[x](javascript:window.__pwned='reply-md')\nPAGE: good\nSENTENCE: 2"
        )
    return "NOT FOUND <iframe src=javascript:alert(1)></iframe>"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    config = AppConfig(corpus=str(_corpus(folder)), cache_dir=folder / "cache")
    service = Service.load(config, progress=lambda message: None, backend=ScriptedBackend(_reply))
    demo, url = serve(service, css=page_css())
    yield url
    demo.close()


@pytest.fixture
def page(browser, server):
    with opened_tab(browser, server, 1280, 1400) as tab:
        yield tab


OUTPUTS = "#raqa-answers, #raqa-windows, #raqa-pages"
FIND_MARKUP = f"""() => {{
    const roots = [...document.querySelectorAll('{OUTPUTS}')];
    const found = [];
    for (const root of roots) {{
        for (const el of root.querySelectorAll('script, img, svg, iframe, style, body, math, object, embed')) {{
            found.push(el.tagName);
        }}
        for (const el of root.querySelectorAll('*')) {{
            for (const attr of el.attributes) {{
                if (attr.name.startsWith('on')) found.push(el.tagName + '[' + attr.name + ']');
            }}
        }}
    }}
    for (const a of document.querySelectorAll('a[href]')) {{
        if (a.getAttribute('href').trim().toLowerCase().startsWith('javascript:')) found.push('javascript link');
    }}
    return found;
}}"""


def _ask(tab, question: str) -> None:
    tab.locator("#raqa-question textarea").fill(question)
    tab.locator("#raqa-run").click()


def test_hostile_pages_question_and_replies_stay_text(page, tmp_path):
    question = "Where do mango trees grow? <img src=x onerror=\"window.__pwned = 'question'\"> \u202e?"
    page.locator("#raqa-k input[type=number]").fill("20")
    page.locator("#raqa-k input[type=number]").press("Enter")
    _ask(page, question)
    page.wait_for_selector(".raqa-final-text", timeout=60000)
    # open every retrieved page, so their full hostile texts are in the document too
    page.get_by_text("All retrieved pages").click()
    page.wait_for_selector("#raqa-pages summary", timeout=10000)
    for summary in page.locator("#raqa-pages summary").all():
        summary.click()
    page.wait_for_timeout(500)
    page.screenshot(path=str(tmp_path / "hostile.png"), full_page=True)

    assert page.evaluate("() => window.__pwned") is None
    assert page.dialogs == []
    assert page.evaluate(FIND_MARKUP) == []
    pages_text = page.locator("#raqa-pages").inner_text()
    for name in ("script", "img", "link", "details", "style", "markdown link"):
        assert PAYLOADS[name].split(" ")[0] in pages_text, name
    replies = page.locator(".raqa-reply").all_inner_texts()
    assert any("<script>window.__pwned = 'reply'</script>" in r for r in replies)
    assert any("<iframe src=javascript:alert(1)></iframe>" in r for r in replies)
    assert page.locator(".raqa-window").count() >= 2
    # the 5,000-letter word wraps instead of widening the page
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")
    # right-to-left overrides stay inside their element
    assert page.evaluate("() => getComputedStyle(document.querySelector('.raqa-page-text')).unicodeBidi") == "isolate"
    assert page.evaluate("() => getComputedStyle(document.body).direction") == "ltr"


def test_the_page_keeps_working_after_hostile_runs(page):
    _ask(page, "<script>window.__pwned = 1</script>mango")
    page.wait_for_selector(".raqa-final-text", timeout=60000)
    _ask(page, "Where do mango trees grow?")
    page.wait_for_function(
        "() => document.querySelector('.raqa-final-text') && "
        "document.querySelector('#raqa-answers')?.innerText.includes('India')",
        timeout=60000,
    )
    assert page.evaluate("() => window.__pwned") is None
    assert page.dialogs == []
    page.get_by_role("tab", name="Experiments").click()
    page.get_by_role("tab", name="Ask").click()
    assert page.locator("#raqa-run").is_enabled()
