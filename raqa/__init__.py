"""raqa: retrieval-augmented question answering that shows when a model should admit ignorance.

The package is organised as a pipeline: `corpus` loads pages, `index` ranks them with BM25,
`engine` runs a reading strategy over the ranked pages with a model backend from `llm`, and
yields the typed events of `events`; the UI, the CLI and the evaluation all consume that stream.
"""

__version__ = "0.1.0"
