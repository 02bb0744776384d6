"""The figures of the committed results: pure `record -> go.Figure` functions (experiments.py, judge.py,
when_to_retrieve.py) and committed.py, which draws each record's figures into JSON files beside the records for the
page to show as they are (raqa/web/committed_figures.py).
"""
