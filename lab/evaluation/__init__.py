"""The lab's measurements: the papers' experiments (registry.py and the runners it names), Adapt-LLM and the
When-to-retrieve pipeline on test questions, the reader and retrieval records, the badges. The question sets, the
metrics and the records the page shows stay in raqa/evaluation."""
