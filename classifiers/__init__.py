"""Verdict classifiers ("Learning Lean Feedback", Section 4.1): an encoder sequence classifier and a
one-token causal-LM classifier, trained on the labelled corpus and served through the shared
Evaluator interface (:mod:`leanloop.evaluator`).
"""
